"""Prompt-cache lifetimes: the loopback Messages API caches by prefix and forgets as time
passes (``llm/_prompt_cache``; ``cache.advance`` lets it pass at once), checked first with
the official ``anthropic`` SDK; then an idle interactive session's first request after a
pause, through Retinue's adapter and a role file's ``cache_ttl``: nothing read back with the
default 5 minutes, the whole prefix with ``1h``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anthropic
import pytest

from retinue.engine import RunConfig, run
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.settings import ModelSettings
from retinue.messages import Message, SystemMessage, UserMessage
from retinue.subagents import RoleCatalog, SubAgentManager
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel, call_tools
from retinue.tools.base import ToolContext, ToolRegistry, tool

FABLE = "claude-fable-5-2"
RULES = "Review with care; name the file and line of every finding. " * 120  # ~1,800 tokens
PAUSE = 10 * 60.0  # an idle session: the parent comes back after ten minutes


@pytest.fixture
def server() -> Iterator[LoopbackAnthropicServer]:
    replies = ScriptedModel(responder=lambda msgs, tools: f"answer {len(msgs)}")
    with LoopbackAnthropicServer(replies).start() as started:
        yield started


def ask(client: anthropic.Anthropic, turns: int, ttl: str | None = None) -> Any:
    """A request of ``turns`` user turns, breakpoints where Retinue puts them."""
    cache: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {i}"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]})
    messages.pop()
    messages[-1]["content"][-1]["cache_control"] = cache
    system = [{"type": "text", "text": RULES, "cache_control": cache}]
    create = cast(Any, client.messages).create
    return create(model=FABLE, max_tokens=100, system=system, messages=messages)


def sdk(server: LoopbackAnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="x", base_url=server.base_url, max_retries=0)


def test_sdk_a_prefix_is_written_then_read(server: LoopbackAnthropicServer) -> None:
    client = sdk(server)
    first = ask(client, 1).usage
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 1_000
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    second = ask(client, 2).usage
    assert second.cache_read_input_tokens >= 0.9 * first.cache_creation_input_tokens
    assert 0 < second.cache_creation_input_tokens < 100  # only the new turn is written
    total = second.input_tokens + second.cache_read_input_tokens
    assert total + second.cache_creation_input_tokens > second.cache_read_input_tokens


def test_sdk_five_minutes_expire_refreshed_by_use_and_an_hour_lasts(
    server: LoopbackAnthropicServer,
) -> None:
    client = sdk(server)
    ask(client, 1)
    server.cache.advance(240)
    assert ask(client, 1).usage.cache_read_input_tokens > 0  # read: refreshed for 5 minutes
    server.cache.advance(240)
    assert ask(client, 1).usage.cache_read_input_tokens > 0  # 8 minutes after the write
    server.cache.advance(301)
    expired = ask(client, 1).usage
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens > 0
    written = ask(client, 3, ttl="1h").usage
    assert written.cache_creation.ephemeral_1h_input_tokens > 0
    server.cache.advance(3_000)
    assert ask(client, 3, ttl="1h").usage.cache_read_input_tokens > 1_000
    server.cache.advance(3_601)
    assert ask(client, 3, ttl="1h").usage.cache_read_input_tokens == 0


def test_sdk_short_prompts_are_not_cached_and_five_breakpoints_are_a_400(
    server: LoopbackAnthropicServer,
) -> None:
    client = sdk(server)
    create = cast(Any, client.messages).create
    cache = {"type": "ephemeral"}
    short = [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cache}]}]
    for _ in range(2):
        usage = create(model=FABLE, max_tokens=10, messages=short).usage
        assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == 0
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": cache} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks"):
        create(model=FABLE, max_tokens=10,
               messages=[{"role": "user", "content": blocks}])  # fmt: skip


# -- through Retinue: the first request of an idle session, after a pause ------------------


async def idle_session_read(
    server: LoopbackAnthropicServer, tmp_path: Path, ttl: str | None
) -> tuple[int, int]:
    """Two turns of one interactive session ten minutes apart: the second turn's request's
    cache reads, and its whole prompt, as Retinue's adapter reports them."""
    base = AnthropicModel(FABLE, base_url=server.base_url, max_retries=0)
    model = base.with_settings(ModelSettings(cache_ttl=ttl))
    ctx = ToolContext("main", tmp_path, tmp_path)
    messages: list[Message] = [SystemMessage(RULES)]
    try:
        for turn in ("review a.py", "and now b.py"):
            messages.append(UserMessage(turn))
            out = await run(RunConfig(model, messages, ToolRegistry(), ctx, interactive=True))
            messages = out.messages
            if turn == "review a.py":
                server.cache.advance(PAUSE)
    finally:
        await base.aclose()  # and its variant
    return out.usage.cache_read_tokens, out.usage.input_tokens


async def test_an_idle_session_reads_its_prefix_only_with_the_hour(
    server: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    read_5m, prompt = await idle_session_read(server, tmp_path, None)
    assert read_5m == 0  # the 5-minute entry expired during the pause: all written again
    assert server.cache_uses[-1].written_5m > 0.9 * prompt
    read_1h, prompt = await idle_session_read(server, tmp_path, "1h")
    assert read_1h > 0.9 * prompt  # everything but the new question came from the cache
    sent = server.requests[-1]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert server.rejected == []


ROLE = """---
name: reviewer
description: Reviews code across many turns.
{ttl}---
{rules}
"""


async def role_session_read(server: LoopbackAnthropicServer, tmp_path: Path, ttl_line: str) -> int:
    """An interactive sub-agent of a role file, continued after a pause: cache reads of the
    continuing turn's request."""
    text = ROLE.format(ttl=ttl_line, rules=RULES)
    role = parse_role(tmp_path / "reviewer.md", text)
    model = AnthropicModel(FABLE, base_url=server.base_url, max_retries=0)
    manager = SubAgentManager(RoleCatalog.of(role), ToolRegistry(), default_model=model)
    ctx = ToolContext("main", tmp_path, tmp_path)
    try:
        await manager.interactive_subagent(ctx, "review a.py", "reviewer")
        server.cache.advance(PAUSE)
        before = len(server.cache_uses)
        await manager.interactive_subagent(ctx, "and now b.py", "reviewer")
        return server.cache_uses[before].read
    finally:
        await manager.cleanup("main")
        await model.aclose()  # its variants (the role's settings) too


async def test_a_role_file_chooses_the_hour(
    server: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    assert await role_session_read(server, tmp_path, "") == 0
    assert await role_session_read(server, tmp_path, "cache_ttl: 1h\n") > 1_000
    assert server.rejected == []


@tool()
def look(ctx: ToolContext, part: int) -> str:
    """Look at one part."""
    return f"part {part}: fine"


async def test_a_step_of_twelve_parallel_calls_still_reads_the_previous_prefix(
    tmp_path: Path,
) -> None:
    """Twelve calls and their results are 24 blocks, past the API's 20-block lookback from the
    last breakpoint; the breakpoint on the reply keeps the previous request in reach."""
    fan = call_tools(*(("look", {"part": i}) for i in range(12)))
    script = LoopbackAnthropicServer(ScriptedModel([fan, "all fine"])).start()
    model = AnthropicModel(FABLE, base_url=script.base_url, max_retries=0)
    ctx = ToolContext("main", tmp_path, tmp_path)
    task = "Look at every part of this report:\n" + "a long pasted report line\n" * 300
    messages: list[Message] = [SystemMessage(RULES), UserMessage(task)]
    try:
        await run(RunConfig(model, messages, ToolRegistry([look]), ctx))
    finally:
        await model.aclose()
        script.close()
    first, second = script.cache_uses
    assert second.read >= 0.95 * first.prompt  # the first request came from the cache
    assert script.rejected == []
