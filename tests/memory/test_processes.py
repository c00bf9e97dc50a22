"""Memory across real processes: recall in a new process, and survival of SIGKILL.

SQLite only (the file's WAL durability); several processes on PostgreSQL are in
test_lost_updates.py, and workers killed mid-turn in tests/server/test_workers.py.
"""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from retinue.memory import open_memory
from retinue.testing import ScriptedModel, call_tool

CONSOLIDATE = """
import asyncio, sys
from pathlib import Path
from retinue.memory import open_memory
from retinue.messages import UserMessage, AssistantMessage
from retinue.testing import ScriptedModel, call_tool
store = open_memory(Path(sys.argv[1]))
model = ScriptedModel([call_tool("memorize", {
    "block_updates": [{"block": "human", "value": "The user is Mira, a marine biologist."}],
    "new_passages": ["Mira's field station is on the island of Vis."],
})])
msgs = [UserMessage("I'm Mira; my station is on Vis."), AssistantMessage("Noted, Mira.")]
asyncio.run(store.consolidate(tenant="acme", role="scout", session_id="s1",
                              messages=msgs, model=model))
model.assert_done()
"""

RECALL = """
import asyncio, sys
from pathlib import Path
from retinue.memory import open_memory
store = open_memory(Path(sys.argv[1]))
print(asyncio.run(store.render("acme", "scout")))
for p in asyncio.run(store.search("acme", "scout", "where is the field station")):
    print("HIT", p.content)
"""

# Consolidates batch after batch of many passages, announcing each one before and after.
WRITER = """
import asyncio, sys
from pathlib import Path
from retinue.memory import open_memory
from retinue.messages import UserMessage
from retinue.testing import ScriptedModel, call_tool
store = open_memory(Path(sys.argv[1]))
async def main():
    for i in range(1000):
        passages = [f"batch{i} item{j} token{i}x{j}" for j in range(400)]
        model = ScriptedModel([call_tool("memorize", {"new_passages": passages})])
        print("begin", i, flush=True)
        await store.consolidate(tenant="t", role="r", session_id=f"s{i}",
                                messages=[UserMessage(f"session {i}")], model=model)
        print("done", i, flush=True)
asyncio.run(main())
"""


def python(script: str, *args: str, timeout: float = 60) -> str:
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return out.stdout


def test_a_new_process_recalls_what_an_earlier_one_consolidated(tmp_path: Path) -> None:
    python(CONSOLIDATE, str(tmp_path))
    out = python(RECALL, str(tmp_path))
    assert "The user is Mira, a marine biologist." in out
    assert "Archival memory: 1 passage " in out
    assert "HIT Mira's field station is on the island of Vis." in out


def test_sigkill_during_a_consolidation_write_loses_no_commit(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline:
            kind, number = proc.stdout.readline().split()
            if kind == "begin" and int(number) == 3:
                time.sleep(0.05)  # inside batch 3's work: model answer, dedup, insert, commit
                break
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()  # what the writer said before it died (it may have raced on)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    later = (line.split() for line in rest.splitlines())
    done = [0, 1, 2] + [int(n) for kind, n in later if kind == "done"]

    with sqlite3.connect(tmp_path / "memory.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = dict(
            conn.execute(
                "SELECT substr(content, 1, instr(content, ' ') - 1), count(*) "
                "FROM passages GROUP BY 1"
            ).fetchall()
        )
    for i in done:
        assert counts[f"batch{i}"] == 400  # every earlier commit intact
    for batch, count in counts.items():
        assert count == 400, f"{batch} was written partially"  # the killed write: all or nothing
    assert len(counts) <= len(done) + 1

    # The killed session's transcript was kept (unless the kill came before it was written);
    # retry finishes its consolidation.
    killed = max(done) + 1
    store = open_memory(tmp_path)
    kept = store.pending.ready(stale_after=0)
    assert [k.session_id for k in kept] in ([], [f"s{killed}"])
    if kept and f"batch{killed}" not in counts:
        messages = json.loads(kept[0].path.read_text())["messages"]
        assert messages[0]["content"] == f"session {killed}"
        passages = [f"batch{killed} item{j} token{killed}x{j}" for j in range(400)]
        model = ScriptedModel([call_tool("memorize", {"new_passages": passages})])
        report = asyncio.run(store.retry_pending(lambda _: model, stale_after=0))
        assert report.applied == [f"s{killed}"]
        counts[f"batch{killed}"] = 400
    assert asyncio.run(store.passage_count("t", "r")) == 400 * len(counts)
    store.close()
