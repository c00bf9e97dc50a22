"""A local model's consolidation is bounded (prompt, output, attempts, time), and a
consolidation scope stops consolidations at once; either way the transcript is kept for
``retinue memory retry`` (issue 25, item 3). SQLite only: the bounds sit above the store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from retinue.llm.tokens import estimate_text_tokens
from retinue.memory import ConsolidationOptions, SQLiteMemory, open_memory
from retinue.memory import consolidate as consolidation
from retinue.memory.consolidate import (
    LOCAL_BOUNDS,
    ConsolidationResult,
    ConsolidationScope,
    _for_model,
    consolidation_scope,
)
from retinue.messages import AssistantMessage, Message, UserMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(30)

LOCAL = "local:qwen2.5-coder-0.5b"
EMPTY = call_tool("memorize", {"block_updates": [], "new_passages": []})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteMemory]:
    memory = open_memory(tmp_path, options=ConsolidationOptions(retry_delay=0))
    yield memory
    memory.close()


def long_session(turns: int = 400) -> list[Message]:
    messages: list[Message] = []
    for n in range(turns):
        messages.append(UserMessage(f"step {n}: the deployment of service {n} uses port {n}"))
        messages.append(AssistantMessage(f"noted: service {n} deploys on port {n} " * 4))
    return messages


def kept(home: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((home / "pending").glob("*.failed.json"))]


async def test_a_local_models_request_is_bounded_and_a_remote_ones_is_not(
    store: SQLiteMemory,
) -> None:
    for n in range(6):  # long passages that match the session
        await store.insert_passage("t", "ops", f"service deployment port note {n} " + "x" * 3000)
    local = ScriptedModel([EMPTY], name=LOCAL)
    remote = ScriptedModel([EMPTY], name="openai:gpt-4o")
    for model, sid in ((local, "s1"), (remote, "s2")):
        result = await store.consolidate_session(
            tenant="t", role="ops", session_id=sid, messages=long_session(), model=model
        )
        assert result.ok, result.error
    local_prompt = local.calls[0].messages[-1].content
    remote_prompt = remote.calls[0].messages[-1].content
    transcript = local_prompt.partition("# The session's conversation\n")[2]
    assert estimate_text_tokens(transcript) <= LOCAL_BOUNDS.token_budget + 50
    assert estimate_text_tokens(remote_prompt) > 4 * LOCAL_BOUNDS.token_budget
    passages = [ln for ln in local_prompt.splitlines() if ln.startswith("- service deployment")]
    assert 0 < len(passages) <= LOCAL_BOUNDS.similar_passages
    assert all(len(p) <= LOCAL_BOUNDS.passage_chars + 3 for p in passages)  # "- " and "…"
    remote_passages = [ln for ln in remote_prompt.splitlines() if ln.startswith("- service")]
    assert len(remote_passages) == 6 and all(len(p) > 3000 for p in remote_passages)


def test_a_local_model_writes_fewer_tokens_and_tries_fewer_times() -> None:
    model = ScriptedModel(name=LOCAL)
    model.max_tokens = 1024  # type: ignore[attr-defined]  # as LocalModel has
    bounded, options, bounds = _for_model(model, ConsolidationOptions(attempts=3))
    assert bounds == LOCAL_BOUNDS
    assert bounded.max_tokens == LOCAL_BOUNDS.max_tokens  # type: ignore[attr-defined]
    assert model.max_tokens == 1024  # type: ignore[attr-defined]  # the shared one is untouched
    assert options.attempts == LOCAL_BOUNDS.attempts
    remote = ScriptedModel(name="anthropic:claude-sonnet-4-5")
    assert _for_model(remote, ConsolidationOptions()) == (remote, ConsolidationOptions(), None)


async def test_a_local_model_that_runs_out_of_time_keeps_the_transcript(
    store: SQLiteMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        consolidation, "LOCAL_BOUNDS", dataclasses.replace(LOCAL_BOUNDS, seconds=0.2)
    )
    model = ScriptedModel([EMPTY], name=LOCAL, delay=600)  # would take ten minutes
    result = await store.consolidate_session(
        tenant="t", role="ops", session_id="slow", messages=long_session(3), model=model
    )
    assert not result.ok
    assert f"{LOCAL} did not finish the consolidation within 0.2 s" in result.error
    (transcript,) = kept(tmp_path)
    assert transcript["session_id"] == "slow" and "TimeoutError" in str(transcript["error"])


async def test_abandoning_a_scope_stops_its_consolidations_at_once(
    store: SQLiteMemory, tmp_path: Path
) -> None:
    scope = ConsolidationScope()
    consolidation_scope.set(scope)  # (this test's own context)
    model = ScriptedModel([EMPTY, EMPTY], delay=600)  # each call would take ten minutes

    async def one(sid: str) -> ConsolidationResult:
        return await store.consolidate_session(
            tenant="t", role="ops", session_id=sid, messages=long_session(2), model=model
        )

    tasks = [asyncio.create_task(one(sid)) for sid in ("a", "b")]
    while model.call_count < 2:
        await asyncio.sleep(0.01)
    assert scope.abandon() == 2
    results = await asyncio.gather(*tasks)
    assert [r.ok for r in results] == [False, False]
    assert all("abandoned" in r.error for r in results)
    assert sorted(str(t["session_id"]) for t in kept(tmp_path)) == ["a", "b"]
    # one that begins while abandoned fails the same way, before any model call
    late = await one("c")
    assert not late.ok and "abandoned" in late.error
    assert model.call_count == 2
    scope.resume()
    ok = await store.consolidate_session(
        tenant="t", role="ops", session_id="d", messages=long_session(2),
        model=ScriptedModel([EMPTY]),
    )  # fmt: skip
    assert ok.ok


async def test_cancelling_the_caller_still_propagates_within_a_scope(
    store: SQLiteMemory, tmp_path: Path
) -> None:
    consolidation_scope.set(ConsolidationScope())
    model = ScriptedModel([EMPTY], delay=600)
    task = asyncio.create_task(
        store.consolidate_session(
            tenant="t", role="ops", session_id="x", messages=long_session(2), model=model
        )
    )
    while model.call_count < 1:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (transcript,) = kept(tmp_path)
    assert transcript["session_id"] == "x"
