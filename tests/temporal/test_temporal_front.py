"""``retinue serve --temporal`` as real processes: two stateless front ends over one worker
process and the dev server serve the same conversation over HTTP on 127.0.0.1 (SSE, the
conversation routes, the OpenAI-compatible endpoint), tenants kept apart. The worker and one
front end find the server in config.toml's ``[temporal]`` table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.server.tokens import TokenBook
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

TOKEN = "front-test-token"
# conversation ids of this module's own: a workflow id is the tenant's and the conversation's
# (not the task queue's), and other tests of the session's server leave theirs running
RUN = uuid.uuid4().hex[:8]
C1, C2, C5 = f"one-{RUN}", f"two-{RUN}", f"five-{RUN}"


def _env(home: Path, server: LoopbackOpenAIServer | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env.update(RETINUE_HOME=str(home), RETINUE_BLOCK_REAL_MODELS="1", OPENAI_API_KEY="test-key",
               RETINUE_TOKEN=TOKEN)  # fmt: skip
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    return env


def spawn(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """A ``retinue`` process, its stderr in ``cwd/<pid>.log`` (a pipe nobody reads would
    fill and stop it)."""
    log = cwd / f"{args[0]}-{uuid.uuid4().hex[:8]}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "retinue", *args], env=env, cwd=cwd, text=True,
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    LOGS[proc.pid] = log
    return proc


LOGS: dict[int, Path] = {}


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def front_url(proc: subprocess.Popen[str]) -> str:
    """The URL a front end's first line names (``... on http://127.0.0.1:PORT``)."""
    deadline = time.monotonic() + 120
    while not (banner := LOGS[proc.pid].read_text().partition("\n")[0]).startswith(
        "retinue serving Temporal"
    ):  # fmt: skip
        assert proc.poll() is None, LOGS[proc.pid].read_text()
        assert time.monotonic() < deadline, "the front end did not start"
        time.sleep(0.05)
    return banner.rsplit(" on ", 1)[1].strip()


def sse(response: httpx.Response) -> list[tuple[str, dict[str, object]]]:
    frames: list[tuple[str, dict[str, object]]] = []
    for block in response.text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            frames.append((lines["event"], json.loads(lines["data"])))
    return frames


@contextmanager
def running(
    address: str, tmp_path: Path, script: list[Any], mode: str = "bypassPermissions"
) -> Iterator[list[str]]:
    """A worker (``--permission-mode mode``) and two front ends on a task queue of their
    own, the model answering ``script``; the front ends' URLs."""
    queue = f"front-{uuid.uuid4().hex}"
    model = ScriptedModel(script)
    home = tmp_path / "home"
    procs: list[subprocess.Popen[str]] = []
    with LoopbackOpenAIServer(model) as server:
        try:
            home.mkdir()  # the worker and one front end read the server from config.toml
            (home / "config.toml").write_text(
                f'[temporal]\naddress = "{address}"\ntask_queue = "{queue}"\n'
            )
            worker = ["worker", "--model", "openai:test", "--permission-mode", mode, "-q"]
            procs.append(spawn(worker, _env(home, server), tmp_path))
            flags = ["--temporal", address, "--task-queue", queue]
            fronts = [
                spawn(["serve", *f, "--port", "0"], _env(home), tmp_path) for f in (flags, [])
            ]
            procs += fronts
            yield [front_url(f) for f in fronts]
        finally:
            for proc in procs:
                stop(proc)
    model.assert_done()


@pytest.fixture
def stack(temporal_address: str, tmp_path: Path) -> Iterator[tuple[list[str], str, Path]]:
    """A worker and two front ends; the model's script: one tool call, then three answers."""
    notes = tmp_path / "notes.txt"
    script = [call_tool("Bash", {"command": f"echo milk >> {notes}"}), "Noted: milk.",
              "You said milk.", "Still milk."]  # fmt: skip
    with running(temporal_address, tmp_path, script) as urls:
        yield urls, TOKEN, notes


def test_two_front_ends_serve_one_conversation(stack: tuple[list[str], str, Path]) -> None:
    (a, b), token, notes = stack
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(headers=auth, timeout=60) as http:
        streamed = http.post(
            f"{a}/v1/conversations/{C1}/messages?stream=true", json={"content": "remember milk"}
        )
        assert streamed.status_code == 200, streamed.text
        frames = sse(streamed)
        kinds = [k for k, _ in frames]
        assert {"tool_started", "tool_finished", "result"} <= set(kinds), frames
        assert kinds.index("tool_started") < kinds.index("tool_finished") < kinds.index("result")
        started = dict(frames[kinds.index("tool_started")][1])
        assert (started["name"], started["agent_id"]) == ("Bash", f"conv-{C1}")
        assert frames[-1] == ("result", {"content": "Noted: milk.", "stop_reason": "final",
                              "usage": frames[-1][1]["usage"], "tools_used": ["Bash"]})  # fmt: skip
        assert notes.read_text() == "milk\n"

        second = http.post(f"{b}/v1/conversations/{C1}/messages", json={"content": "what?"})
        assert second.status_code == 200, second.text
        assert second.json()["content"] == "You said milk."

        chat = http.post(
            f"{a}/v1/chat/completions",
            headers={"X-Retinue-Conversation": C1},
            json={"model": "retinue", "messages": [{"role": "user", "content": "and now?"}]},
        )
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["content"] == "Still milk."
        assert chat.headers["X-Retinue-Conversation"] == C1

        history = http.get(f"{b}/v1/conversations/{C1}").json()["messages"]
        roles = ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]
        assert [m["role"] for m in history] == roles

        deadline = time.monotonic() + 60
        while True:  # (the list is Temporal's visibility store: it catches up in a moment)
            listed = http.get(f"{b}/v1/conversations").json()["conversations"]
            if [c["id"] for c in listed] == [C1]:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        assert listed[0]["title"] == "remember milk"

        assert http.delete(f"{a}/v1/conversations/{C1}").status_code == 200
        deadline = time.monotonic() + 60
        while True:  # (DELETE signals the workflow: it closes, its transcript kept, a moment later)
            gone = http.get(f"{b}/v1/conversations/{C1}")
            if gone.status_code == 404:
                break
            assert gone.status_code == 200 and time.monotonic() < deadline, gone.text
            time.sleep(0.1)
    assert notes.read_text() == "milk\n"  # the tool ran once in all


def test_a_tenant_sees_only_its_own_conversations(
    stack: tuple[list[str], str, Path], tmp_path: Path
) -> None:
    (a, b), token, _notes = stack
    bo = TokenBook(tmp_path / "home").issue("bo")
    with httpx.Client(timeout=60) as http:
        own = {"Authorization": f"Bearer {token}"}
        first = http.post(f"{a}/v1/conversations/{C2}/messages", headers=own,
                          json={"content": "remember milk"})  # fmt: skip
        assert first.status_code == 200, first.text
        theirs = {"Authorization": f"Bearer {bo}"}
        assert http.get(f"{b}/v1/conversations/{C2}", headers=theirs).status_code == 404
        assert http.get(f"{b}/v1/conversations", headers=theirs).json() == {"conversations": []}
        assert http.delete(f"{b}/v1/conversations/{C2}", headers=theirs).status_code == 404
        assert http.get(f"{b}/v1/conversations/{C2}", headers=own).status_code == 200
        assert http.get(f"{a}/v1/conversations/{C2}").status_code == 401  # no token
        # the rest of the script is for the other test: end this one's conversation
        for answer in ("You said milk.", "Still milk."):
            r = http.post(f"{b}/v1/conversations/{C2}/messages", headers=own,
                          json={"content": "and?"})  # fmt: skip
            assert r.json()["content"] == answer


async def test_an_approval_is_answered_through_the_other_front_end(
    temporal_address: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    script = [call_tool("Write", {"file_path": str(out), "content": "hi"}), "Written."]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    frames: list[tuple[str, dict[str, Any]]] = []
    with running(temporal_address, tmp_path, script, mode="default") as (a, b):
        async with (
            httpx.AsyncClient(headers=auth, timeout=60) as http,
            http.stream("POST", f"{a}/v1/conversations/{C5}/messages?stream=true",
                        json={"content": "write hi"}) as streamed,
        ):  # fmt: skip
            kind = ""
            async for line in streamed.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    frames.append((kind, json.loads(line.removeprefix("data: "))))
                    if kind != "approval_requested":
                        continue
                    request = frames[-1][1]  # the call waits: answered through the other one
                    assert (request["tool"], request["agent_id"]) == ("Write", f"conv-{C5}")
                    assert not out.exists()
                    shown = (await http.get(f"{b}/v1/conversations/{C5}/approvals")).json()
                    assert [r["id"] for r in shown["approvals"]] == [request["id"]]
                    url = f"{b}/v1/conversations/{C5}/approvals/{request['id']}"
                    answered = await http.post(url, json={"allow": True})
                    assert answered.status_code == 200, answered.text
                    again = await http.post(url, json={"allow": True})
                    assert again.status_code == 404  # answered once
    assert [k for k, _ in frames].count("approval_requested") == 1
    assert frames[-1][0] == "result" and frames[-1][1]["content"] == "Written."
    assert out.read_text() == "hi"
