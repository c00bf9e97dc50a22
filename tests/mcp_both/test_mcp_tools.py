"""MCP tools in runs: real servers over stdio (the test's echo server, the published
``mcp-server-time``) and streamable HTTP, driven by the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from mcp_kit import ECHO, needs_sandbox, role, running, trust_all

from retinue.config import Settings
from retinue.messages import ToolResultMessage
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # bounds a hang; a loaded machine starts servers slowly

WAIT_S = 60.0  # polled: returns once ready, so generous costs nothing on a quick machine


async def until(condition: Callable[[], bool]) -> bool:
    """Poll ``condition`` until it holds (``True``) or :data:`WAIT_S` passes (``False``)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


@pytest.fixture
async def runtime_of(settings: Settings) -> AsyncIterator:
    made: list[Runtime] = []

    def make(model: ScriptedModel) -> Runtime:
        rt = Runtime.create(settings, model=model, with_memory=False)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        await rt.tools.close_sources()


def result(model: ScriptedModel, call: int) -> ToolResultMessage:
    """The tool result the model read at its ``call``-th request."""
    last = model.calls[call].messages[-1]
    assert isinstance(last, ToolResultMessage)
    return last


def results(model: ScriptedModel, call: int) -> str:
    return result(model, call).content


@needs_sandbox
async def test_a_role_limited_to_one_mcp_tool_sees_and_calls_only_it(
    workspace: Path, runtime_of
) -> None:
    role(workspace, "clock", "tools: mcp__time__get_current_time")
    offered: list[list[str]] = []

    def sub_first(messages, tools):
        offered.append([t.name for t in tools])
        return call_tool("mcp__time__get_current_time", {"timezone": "UTC"})

    model = ScriptedModel([
        call_tool("SubAgent", {"task": "what time is it?", "role": "clock"}),
        sub_first,
        "It is now.",
        "The clock says it is now.",
    ])  # fmt: skip
    out = await runtime_of(model).conversation().send("time?")
    assert out.content == "The clock says it is now."
    assert offered == [["mcp__time__get_current_time"]]
    assert '"timezone": "UTC"' in results(model, 2) and "datetime" in results(model, 2)
    main_tools = {t.name for t in model.calls[0].tools}
    assert {"mcp__echo__echo", "mcp__time__get_current_time"} <= main_tools


@needs_sandbox
async def test_results_map_text_structured_images_and_errors(runtime_of) -> None:
    model = ScriptedModel([
        call_tool("mcp__echo__echo", {"text": "hi"}),
        call_tool("mcp__echo__add", {"a": 2, "b": 3}),
        call_tool("mcp__echo__picture"),
        call_tool("mcp__echo__fail", {"reason": "no way"}),
        call_tool("mcp__echo__echo", {"text": 5}),
        "done",
    ])  # fmt: skip
    await runtime_of(model).conversation().send("go")
    assert results(model, 1) == "echo: hi"
    assert '"sum": 5' in results(model, 2)
    assert results(model, 3).startswith("[image: image/png") and "not shown" in results(model, 3)
    failed = result(model, 4)
    assert failed.is_error and "no way" in failed.content
    assert result(model, 5).is_error


@needs_sandbox
async def test_a_crashed_server_gives_an_error_and_the_next_call_restarts_it(
    runtime_of, marks: Path
) -> None:
    model = ScriptedModel([
        call_tool("mcp__echo__instance"),
        call_tool("mcp__echo__crash"),
        call_tool("mcp__echo__instance"),
        "done",
    ])  # fmt: skip
    await runtime_of(model).conversation().send("go")
    first = results(model, 1)
    crashed = result(model, 2)
    assert crashed.is_error and "MCP server 'echo'" in crashed.content
    assert "restarted on next use" in crashed.content
    second = results(model, 3)
    assert second != first
    assert not running(marks, first)


async def test_a_timed_out_call_is_cancelled_on_the_server(
    tmp_path: Path, marks: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        "[mcp_servers.slow]\n"
        f"command = {_toml(sys.executable)}\n"
        f"args = [{_toml(str(ECHO))}]\n"
        "timeout = 3\n"  # the tools' listing must fit in it too, on a loaded machine
        f"env = {{ ECHO_MARKS = {_toml(str(marks))} }}\n"
    )
    settings = Settings.load(home=home, workspace=workspace, model="scripted:model")
    model = ScriptedModel([call_tool("mcp__slow__sleep", {"seconds": 30}), "done"])
    rt = Runtime.create(settings, model=model, with_memory=False)
    try:
        await rt.conversation().send("go")
        timed_out = result(model, 1)
        assert timed_out.is_error and "timed out after 3 s and was cancelled" in timed_out.content
        assert await until((marks / "sleep-cancelled").exists)
    finally:
        await rt.tools.close_sources()


@needs_sandbox
async def test_a_cancelled_run_cancels_the_call_on_the_server(runtime_of, marks: Path) -> None:
    model = ScriptedModel([call_tool("mcp__echo__sleep", {"seconds": 30})])
    conv = runtime_of(model).conversation()
    task = asyncio.create_task(conv.send("go"))
    assert await until((marks / "sleep-started").exists)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await until((marks / "sleep-cancelled").exists)


@needs_sandbox
async def test_disallowed_and_whole_server_entries(workspace: Path, runtime_of) -> None:
    role(workspace, "echoer", "tools: [mcp__echo]\ndisallowedTools: mcp__echo__crash")
    seen: list[set[str]] = []

    def sub(messages, tools):
        seen.append({t.name for t in tools})
        return "ok"

    model = ScriptedModel([call_tool("SubAgent", {"task": "t", "role": "echoer"}), sub, "done"])
    await runtime_of(model).conversation().send("go")
    assert {"mcp__echo__echo", "mcp__echo__sleep"} <= seen[0]
    assert "mcp__echo__crash" not in seen[0]
    assert all(n.startswith("mcp__echo__") for n in seen[0])


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@needs_sandbox
async def test_a_tool_list_change_refreshes_the_tools(runtime_of) -> None:
    model = ScriptedModel([call_tool("mcp__echo__grow"), call_tool("mcp__echo__extra"), "done"])
    await runtime_of(model).conversation().send("go")
    assert "mcp__echo__extra" not in model.calls[0].tool_names
    assert "mcp__echo__extra" in model.calls[1].tool_names
    assert results(model, 2) == "extra here"


@pytest.fixture(params=["http", "sse"])
def http_echo(marks: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The echo server on streamable HTTP or SSE, on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ECHO_MARKS": str(marks)}
    kind = request.param
    proc = subprocess.Popen([sys.executable, str(ECHO), kind, str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        yield kind, f"http://127.0.0.1:{port}/{'mcp' if kind == 'http' else 'sse'}"
    finally:
        proc.terminate()
        proc.wait(WAIT_S)


async def test_a_server_over_streamable_http_and_sse(
    tmp_path: Path, workspace: Path, http_echo: tuple[str, str]
) -> None:
    kind, url = http_echo
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"web": {"type": kind, "url": url}}})
    )
    trust_all(tmp_path / "home", workspace)
    settings = Settings.load(home=tmp_path / "home", workspace=workspace, model="scripted:model")
    model = ScriptedModel([call_tool("mcp__web__echo", {"text": "over http"}), "done"])
    rt = Runtime.create(settings, model=model, with_memory=False)
    try:
        await rt.conversation().send("go")
    finally:
        await rt.tools.close_sources()
    assert results(model, 1) == "echo: over http"


@needs_sandbox
def test_a_second_event_loop_starts_the_server_afresh(settings: Settings, marks: Path) -> None:
    model = ScriptedModel([
        call_tool("mcp__echo__instance"), "one", call_tool("mcp__echo__instance"), "two",
    ])  # fmt: skip
    rt = Runtime.create(settings, model=model, with_memory=False)
    asyncio.run(rt.conversation().send("first"))
    first = results(model, 1)
    assert gone_soon(marks, first)
    asyncio.run(rt.conversation().send("second"))
    assert results(model, 3) != first
    asyncio.run(rt.tools.close_sources())


def gone_soon(marks: Path, instance: str) -> bool:
    deadline = time.monotonic() + WAIT_S
    while running(marks, instance):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@needs_sandbox
async def test_the_client_names_itself_retinue_with_its_version(runtime_of) -> None:
    from importlib.metadata import version

    model = ScriptedModel([call_tool("mcp__echo__client"), "done"])
    await runtime_of(model).conversation().send("go")
    assert results(model, 1) == f"retinue {version('retinue')}"
