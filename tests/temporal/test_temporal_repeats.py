"""The loop detectors on Temporal (retinue.temporal._repeats), as in-process: the same call
with the same result is noted, then refused and the turn ends; the same task delegated to
the same role again and again is answered with a note, then the turn ends. Against a real
dev server and an in-process worker, with scripted models."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from test_temporal_tree import conversations, delegate, role, runtime_for

from retinue.messages import ToolResultMessage
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included


async def test_the_same_call_with_the_same_result_is_noted_then_ends_the_turn(
    temporal_address: str, tmp_path: Path
) -> None:
    runs: list[str] = []

    @tool
    async def look(path: str) -> str:
        """Look at a file."""
        runs.append(path)
        return "nothing new"

    again = call_tool("look", {"path": "a.txt"})
    main = ScriptedModel([again, again, again, again, "unreached"])
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[], tools=[look])
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("loops", "look at a.txt")
        history = await convs.history("loops")
    assert reply.stop_reason == "repeated_call"
    assert reply.content.startswith("Stopped: the agent called look with the same arguments")
    assert runs == ["a.txt"] * 3  # the fourth was not run
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [r.content.startswith("nothing new") for r in results] == [True, True, True, False]
    assert "made this exact call 3 times in a row" in results[2].content
    assert "made this exact call" not in results[1].content
    assert results[3].is_error and "not run" in results[3].content
    assert history[-1].content == reply.content


async def test_the_same_task_delegated_again_and_again_is_a_note_then_the_end(
    temporal_address: str, tmp_path: Path
) -> None:
    same = delegate("helper", "count the files")
    main = ScriptedModel([same, same, same, same, "unreached"])
    helper = ScriptedModel(["3 files.", "Still 3 files."])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:helper": helper}, roles=[role("helper")])
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("delegates", "how many files?")
        history = await convs.history("delegates")
    assert reply.stop_reason == "repeated_call"
    assert reply.content.startswith("Stopped: the agent delegated the same task to 'helper' 4")
    results = [m.content for m in history if isinstance(m, ToolResultMessage)]
    assert results[0].startswith("3 files.") and results[1].startswith("Still 3 files.")
    assert results[2].startswith("Not run: you delegated this same task to 'helper' 3 times")
    assert results[3] == "Not run: the same task was delegated again; your turn stops."
    helper.assert_done()  # two runs, not four
