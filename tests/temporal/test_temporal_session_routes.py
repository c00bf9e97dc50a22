"""The routes of one session on ``retinue serve --temporal``'s front end, over real HTTP (uvicorn
on 127.0.0.1) against a real dev server and an in-process worker: the sessions of a
conversation's tree listed, one session's state and history, a sub-agent session's turn
interrupted alone while its parent's turn waits on it (the parent's turn goes on and reads it;
the session is idle and takes the next message), and what runs under it stopped with it.
Another tenant, or an id that is not a node of the tree, gets 404."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

import uvicorn
from fastapi import FastAPI
from temporalio.client import Client
from test_temporal_cancel_turn import lines, stuck_tool

from retinue.config import Settings
from retinue.engine.loop import CANCELLED_RESULT
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.server.tokens import TokenBook
from retinue.subagents.roles import Role
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import INTERRUPTED_NOTE
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(180)  # a hang bound, the dev server's start included

TOKEN = "session-routes-token"
ON = {"interactive": True}


def role(name: str, *caps: str) -> Role:
    return Role(name, f"the {name} role", f"You are {name}.", None, f"scripted:{name}",
                frozenset(caps))  # fmt: skip


def read_result(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """The main agent's answer: what its last tool call returned."""
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    return f"read: {result.content}"


async def until(check: Callable[[], bool | Awaitable[bool]]) -> None:
    """Wait until ``check`` holds (the test's timeout bounds it)."""
    while True:
        held = check()
        if await held if inspect.isawaitable(held) else held:
            return
        await asyncio.sleep(0.05)


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """uvicorn serving ``app`` on a free loopback port, in this event loop (the front end's
    Temporal client is this loop's); its URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await until(lambda: server.started or task.done())
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def stack(
    address: str, tmp_path: Path, main: ScriptedModel, models: dict[str, ScriptedModel],
    roles: list[Role],
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, TemporalFront]]:  # fmt: skip
    """A worker and the front end over HTTP; a client of the service's tenant, one of
    tenant ``bo``'s, and the front end."""
    log = tmp_path / "log.txt"
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(
        settings, model=main, model_for=models.__getitem__, roles=roles,
        extra_tools=[stuck_tool(log)], with_memory=False, builtins=False,
    )  # fmt: skip
    book = TokenBook(tmp_path / "home")
    bo = book.issue("bo")
    client = await Client.connect(address)
    queue = f"test-{uuid.uuid4().hex}"
    front = TemporalFront(client, task_queue=queue)
    app = create_temporal_app(front, Security.build(TOKEN, tokens=book))
    async with (
        make_worker(client, runtime, queue),
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as own,
        httpx.AsyncClient(base_url=url, timeout=60,
                          headers={"Authorization": f"Bearer {bo}"}) as other,
    ):  # fmt: skip
        yield own, other, front


async def retinue(args: list[str], http: httpx.AsyncClient, home: Path) -> str:
    """``retinue ARGS --url URL --token TOKEN`` (``retinue sessions``, ``retinue interrupt``)
    against the front end; its output, once it succeeded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env.update(RETINUE_HOME=str(home), RETINUE_BLOCK_REAL_MODELS="1", COLUMNS="200")
    argv = [sys.executable, "-m", "retinue", *args, "--url", str(http.base_url), "--token", TOKEN]
    done = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True,
                                   text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_session_is_listed_shown_and_interrupted_alone(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    cid = f"routes-{uuid.uuid4().hex[:8]}"
    sid = f"conv-{cid}/helper"
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "wait", **ON}),
                          read_result,
                          call_tool("SubAgent", {"role": "helper", "task": "again", **ON}),
                          read_result])  # fmt: skip
    helper = ScriptedModel([call_tool("stuck", {}), "helper is back"])
    async with stack(temporal_address, tmp_path, main, {"scripted:helper": helper},
                     [role("helper")]) as (http, other, front):  # fmt: skip
        turn = asyncio.create_task(
            http.post(f"/v1/conversations/{cid}/messages", json={"content": "ask the helper"})
        )
        await until(lambda: "started" in lines(log))  # the session's long call runs
        listed = ok(await http.get("/v1/sessions"))["sessions"]
        in_team = ok(await http.get("/v1/sessions", params={"team": f"conv-{cid}"}))["sessions"]
        under = ok(await http.get("/v1/sessions", params={"parent": f"conv-{cid}"}))["sessions"]
        busy = ok(await http.get(f"/v1/sessions/{sid}"))
        table = await retinue(["sessions"], http, tmp_path / "cli")  # what `retinue sessions` shows

        # another tenant, and ids that are no node of the tree: as if it did not exist
        foreign = [
            await other.get(f"/v1/sessions/{sid}"),
            await other.post(f"/v1/sessions/{sid}/interrupt"),
            await other.post(f"/v1/sessions/conv-{cid}/interrupt"),
            await http.get(f"/v1/sessions/retinue%2Fdefault%2F{cid}%2Fhelper~1"),  # a workflow id
            await http.get(f"/v1/sessions/conv-{cid}/helper~1"),
            await http.get(f"/v1/sessions/conv-{cid}"),  # the main agent: the conversation
            await http.get(f"/v1/sessions/conv-{cid}/{'x' * 2_000}"),
            await http.post(f"/v1/sessions/conv-{cid}/nobody/interrupt"),
        ]
        theirs = ok(await other.get("/v1/sessions"))
        theirs_team = ok(await other.get("/v1/sessions", params={"team": f"conv-{cid}"}))
        steer = await http.post(f"/v1/sessions/{sid}/steer", json={"content": "hurry"})

        interrupted = ok(await http.post(f"/v1/sessions/{sid}/interrupt"))
        reply = ok(await turn)  # the main turn goes on, and ends as usual
        await until(lambda: "cancelled" in lines(log))  # the session's call was cancelled
        idle = ok(await http.get(f"/v1/sessions/{sid}"))
        again = ok(await http.post(f"/v1/sessions/{sid}/interrupt"))  # none runs now
        said_idle = await retinue(["interrupt", sid], http, tmp_path / "cli")

        second = ok(await http.post(f"/v1/conversations/{cid}/messages",
                                    json={"content": "ask again"}))  # fmt: skip
        after = ok(await http.get(f"/v1/sessions/{sid}"))

        async def both_visible() -> bool:  # (Temporal's visibility store catches up)
            query = f"TaskQueue = '{front.task_queue}' AND ExecutionStatus = 'Running'"
            return len([w async for w in front.client.list_workflows(query)]) == 2

        await until(both_visible)  # the conversation's workflow and its session's
        conversations = ok(await http.get("/v1/conversations"))["conversations"]

    shown = {"id": sid, "parent_id": f"conv-{cid}", "role": "helper", "instance": None,
             "kind": "interactive", "state": "running", "turns": 0}  # fmt: skip
    assert [{k: s[k] for k in shown} for s in listed] == [shown]
    assert in_team == listed and under == listed
    # its model call's tokens (the scripted model's estimate; its price is unknown)
    assert listed[0]["tokens"] > 0 and listed[0]["cost_usd"] is None
    assert {k: busy[k] for k in shown} == shown
    said = [(m["role"], m.get("tool_calls", [{}])[0].get("name")) for m in busy["history"]]
    assert said == [("user", None), ("assistant", "stuck")]
    assert "wait" in busy["history"][0]["content"] and busy["messages"] == 2
    assert sid in table and "helper" in table and "running" in table

    assert [r.status_code for r in foreign] == [404] * len(foreign)
    assert theirs == {"sessions": [], "tasks": {}} and theirs_team == theirs
    assert ok(steer) == {"id": sid, "steered": True}  # (the session's next turn shows it)

    assert interrupted == {"id": sid, "interrupted": True}
    assert reply["stop_reason"] == "final"  # the parent's turn was not interrupted
    # it read that the session's turn was interrupted (as in-process), and that it waits
    assert reply["content"].startswith(f"read: [turn of {cid}/helper interrupted; the session")
    assert f"interactive session {cid}/helper is waiting" in reply["content"]
    # (an interrupted turn is not counted, as in-process)
    assert (idle["state"], idle["turns"], idle["last_reply"]) == ("idle", 0, INTERRUPTED_NOTE)
    results = [m["content"] for m in idle["history"] if m["role"] == "tool"]
    assert results == [CANCELLED_RESULT]  # its call in flight was answered "cancelled"
    assert again == {"id": sid, "interrupted": False}
    assert said_idle.strip() == f"{sid} has no running turn; nothing to interrupt"

    assert second["content"].startswith("read: helper is back")  # the session took it
    assert (after["state"], after["turns"], after["last_reply"]) == ("idle", 1, "helper is back")
    # the conversation is listed, its session's child workflow not as one of its own
    assert [c["id"] for c in conversations] == [cid]
    assert lines(log) == ["started", "cancelled"]
    main.assert_done()
    helper.assert_done()


async def test_interrupting_a_session_stops_the_turns_of_its_own_sessions(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    cid = f"nested-{uuid.uuid4().hex[:8]}"
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "go", **ON}),
                          read_result])  # fmt: skip
    helper = ScriptedModel([call_tool("SubAgent", {"role": "sub", "task": "wait", **ON})])
    sub = ScriptedModel([call_tool("stuck", {})])
    models = {"scripted:helper": helper, "scripted:sub": sub}
    roles = [role("helper", "spawn_agent"), role("sub")]
    async with stack(temporal_address, tmp_path, main, models, roles) as (http, _other, _front):
        turn = asyncio.create_task(
            http.post(f"/v1/conversations/{cid}/messages", json={"content": "delegate"})
        )
        await until(lambda: "started" in lines(log))  # the sub-session's long call runs
        running = ok(await http.get("/v1/sessions", params={"team": f"conv-{cid}"}))["sessions"]
        interrupted = ok(await http.post(f"/v1/sessions/conv-{cid}/helper/interrupt"))
        reply = ok(await turn)
        await until(lambda: "cancelled" in lines(log))  # the sub-session's call was cancelled

        async def settled() -> bool:
            shown = await http.get("/v1/sessions", params={"team": f"conv-{cid}"})
            return {s["state"] for s in ok(shown)["sessions"]} == {"idle"}

        await until(settled)
        sub_history = ok(await http.get(f"/v1/sessions/conv-{cid}/helper/sub"))["history"]
        below = ok(await http.get("/v1/sessions", params={"parent": f"conv-{cid}/helper"}))
    tree = sorted((s["id"], s["parent_id"], s["state"]) for s in running)
    assert tree == [(f"conv-{cid}/helper", f"conv-{cid}", "running"),
                    (f"conv-{cid}/helper/sub", f"conv-{cid}/helper", "running")]  # fmt: skip
    assert interrupted == {"id": f"conv-{cid}/helper", "interrupted": True}
    assert reply["stop_reason"] == "final"
    assert reply["content"].startswith(f"read: [turn of {cid}/helper interrupted; the session")
    assert [m["content"] for m in sub_history if m["role"] == "tool"] == [CANCELLED_RESULT]
    assert [s["id"] for s in below["sessions"]] == [f"conv-{cid}/helper/sub"]
    assert lines(log) == ["started", "cancelled"]
    main.assert_done()
    helper.assert_done()
    sub.assert_done()


async def test_a_one_shot_run_interrupted_alone_ends_and_its_parent_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    cid = f"once-{uuid.uuid4().hex[:8]}"
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "wait"}), read_result])
    helper = ScriptedModel([call_tool("stuck", {})])
    async with stack(temporal_address, tmp_path, main, {"scripted:helper": helper},
                     [role("helper")]) as (http, _other, _front):  # fmt: skip
        turn = asyncio.create_task(
            http.post(f"/v1/conversations/{cid}/messages", json={"content": "run it once"})
        )
        await until(lambda: "started" in lines(log))
        [run] = ok(await http.get("/v1/sessions", params={"team": f"conv-{cid}"}))["sessions"]
        interrupted = ok(await http.post(f"/v1/sessions/{quote(run['id'])}/interrupt"))
        reply = ok(await turn)

        async def gone() -> bool:  # (a one-shot run closes itself after its reply)
            shown = await http.get("/v1/sessions", params={"team": f"conv-{cid}"})
            return ok(shown)["sessions"] == []

        await until(gone)
        after = await http.get(f"/v1/sessions/{quote(run['id'])}")
    assert (run["id"], run["kind"], run["state"]) == (f"conv-{cid}/helper#1", "one-shot", "running")
    assert interrupted == {"id": run["id"], "interrupted": True}
    assert reply["stop_reason"] == "final"
    assert reply["content"] == f"read: [turn of {cid}/helper#1 interrupted; the run has ended]"
    assert after.status_code == 404
    main.assert_done()
    helper.assert_done()
