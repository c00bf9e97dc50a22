"""Lifecycle fuzzing with messages and a shared task list (issue 31, "Done when").

The nested scenario of ``benchmarks/lifecycle_fuzz.py`` (``main`` opens ``a``, ``a:x``, each
``a`` opens ``b``, ``b`` opens ``c``, which asks; background turns, steering, unloads), under
the same attacks (model errors, cancels and interrupts at model call k or at random moments,
steering and outside answers), where at random model calls every session's scripted model
also does team work instead of its next step (at most three times a turn):

- ``SendMessage`` to ``main``, ``parent``, a sibling's or child's role, or a live session id,
  sometimes with ``wait=true``; a session that was just messaged often messages the sender
  back, also with ``wait=true`` (so pairs that would wait on each other are made);
- ``TaskCreate`` with dependencies on earlier tasks, ``TaskUpdate`` claims (``in_progress``),
  completions, releases (``owner=''``) and reopenings (``pending``), ``TaskList``, ``TaskGet``
  on a small list, so that sessions running at once contend for the same tasks.

The task list is a real SQLite memory store in a temporary directory (the sessions' memory,
which renders and consolidates, stays the recording fake). A trigger on its ``tasks`` table
writes every update, with how many of the task's dependencies were open at that moment,
inside the writing transaction, so the audit is in commit order.

After every run, the lifecycle checks (no hang, no session left, every session consolidated
exactly once, no asyncio task left running, every history valid) and: no task passed from one
owner to another (the models never hand over, so that would be two claims at once), no task
claimed or completed while a dependency was open, and every ``SendMessage(wait=true)`` got a
reply or a clear answer (an error saying why, or a note that the turn ended without one).
A history whose only problem is that its last turn stopped at ``max_iterations`` is counted
apart (``stopped_at_limit``: a known engine finding, not the fuzz's). A hung run records its
``SendMessage`` waits (``hangs_by_wait``: on an ancestor, on a session asking, ...).

    uv run python benchmarks/team_fuzz.py            # the long version (>= 1,000 runs)
    uv run python benchmarks/team_fuzz.py --quick    # ~250 runs (a minute or so)

Results go to ``benchmarks/results/team_fuzz.json``. Runs use fixed seeds, but the store's
writes run in threads, so a seed replays the same attacks, not always the same interleaving.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lifecycle_fuzz as lf

from retinue.llm.base import ToolSpec
from retinue.memory import open_memory
from retinue.memory.base import Memory
from retinue.memory.sqlite import SQLiteMemory
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from retinue.subagents.messaging import messenger_of
from retinue.subagents.tasklist import TASK_TOOL_NAMES, task_tools
from retinue.subagents.tools import SEND_TOOL_NAME, send_message
from retinue.testing import call_tool
from retinue.tools import Tool

RESULTS = Path(__file__).resolve().parent / "results" / "team_fuzz.json"
TEAM_TOOLS = TASK_TOOL_NAMES | {SEND_TOOL_NAME}
MOST_TASKS = 8  # a small list: sessions contend for the same tasks
MOST_PER_TURN = 3  # team steps a model takes in one turn at most
CHANCE = 0.35  # of a team step at a model call
FROM = re.compile(r"\[message from ([^\s:\]]+):")
TARGETS = ("main", "parent", "a", "b", "c", "a:x", "nobody")

AUDIT = """
CREATE TABLE fuzz_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER, old_owner TEXT, new_owner TEXT,
    old_status TEXT, new_status TEXT, open_deps INTEGER);
CREATE TRIGGER fuzz_audit_update AFTER UPDATE ON tasks BEGIN
    INSERT INTO fuzz_audit (id, old_owner, new_owner, old_status, new_status, open_deps)
    VALUES (NEW.id, OLD.owner, NEW.owner, OLD.status, NEW.status, (
        SELECT count(*) FROM json_each(NEW.blocked_by) AS d WHERE NOT EXISTS (
            SELECT 1 FROM tasks AS t WHERE t.tenant = NEW.tenant AND t.team = NEW.team
            AND t.id = d.value AND t.status = 'completed')));
END;
"""


def _team_call(m: Message) -> bool:
    return isinstance(m, AssistantMessage) and any(c.name in TEAM_TOOLS for c in m.tool_calls)


@dataclass
class TeamRun(lf.Run):
    """A lifecycle run, with what the team work did and what its checks found."""

    two_owners: list[str] = field(default_factory=list)  # owner A -> owner B, no release
    claimed_blocked: list[str] = field(default_factory=list)  # claimed with an open dependency
    completed_blocked: list[str] = field(default_factory=list)  # completed with one open
    unclear_waits: list[str] = field(default_factory=list)  # wait=true: no reply, no reason
    stopped_at_limit: list[str] = field(default_factory=list)  # see _at_limit (a finding)
    steps: Counter[str] = field(default_factory=Counter)  # team calls by kind and outcome

    @property
    def ok(self) -> bool:
        return super().ok and not (
            self.two_owners or self.claimed_blocked or self.completed_blocked or self.unclear_waits
        )


class TeamScenario(lf.Scenario):
    """The lifecycle scenario whose models also message each other and share a task list."""

    def __init__(self, faults: lf.Faults, workspace: Path, store: SQLiteMemory, **kw: Any) -> None:
        self.store = store
        self.created = 0  # TaskCreate calls made (ids 1..created may exist)
        super().__init__(faults, workspace, **kw)

    def _memory(self) -> lf.FuzzMemory:
        memory = lf.FuzzMemory(self.faults)
        memory.tasks = self.store.tasks  # type: ignore[attr-defined]  (it keeps task lists)
        return memory

    def _tool_memory(self) -> Memory | None:
        return self.store

    def _main_tools(self) -> Sequence[Tool]:
        return (send_message, *task_tools())

    def _step(self, name: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        have = {t.name for t in tools} & TEAM_TOOLS
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        done = sum(_team_call(m) for m in messages[last_user:])
        rng = self.faults.rng
        if have and done < MOST_PER_TURN and rng.random() < CHANCE:
            step = self._team_step(messages[last_user:], have)
            if step is not None:
                return step
        plan_messages = [m for m in messages if not _team_call(m)]  # the plan goes on
        return super()._step(name, plan_messages, tools)

    def _team_step(self, turn: Sequence[Message], have: set[str]) -> AssistantMessage | None:
        rng = self.faults.rng
        first = turn[0]
        sender = FROM.search(first.content) if isinstance(first, UserMessage) else None
        if sender is not None and SEND_TOOL_NAME in have and rng.random() < 0.6:
            to = sender.group(1)  # message back whoever messaged this turn, maybe waiting
            return call_tool(
                SEND_TOOL_NAME, {"to": to, "message": "re", "wait": rng.random() < 0.5}
            )
        kinds = ["send"] if SEND_TOOL_NAME in have else []
        if "TaskUpdate" in have:
            kinds += ["create", "claim", "complete", "release", "reopen", "read"]
        if not kinds:
            return None
        kind = rng.choice(kinds)
        if kind == "send":
            live = [s.id for s in self.manager.sessions()]
            to = rng.choice([*TARGETS, *live])
            return call_tool(
                SEND_TOOL_NAME, {"to": to, "message": "note", "wait": rng.random() < 0.4}
            )
        if kind == "create" and self.created < MOST_TASKS:
            self.created += 1
            deps = rng.sample(range(1, self.created), min(self.created - 1, rng.randint(0, 2)))
            return call_tool("TaskCreate", {"subject": f"t{self.created}", "blocked_by": deps})
        if self.created == 0:
            return call_tool("TaskList")
        tid = rng.randint(1, self.created)
        args: dict[str, Any] = {
            "claim": {"status": "in_progress"},
            "complete": {"status": "completed"},
            "release": {"owner": ""},
            "reopen": {"status": "pending"},
        }.get(kind, {})
        if not args:
            return (
                call_tool("TaskGet", {"id": tid}) if rng.random() < 0.5 else call_tool("TaskList")
            )
        return call_tool("TaskUpdate", {"id": tid, **args})

    def stuck(self) -> str:
        """The ``SendMessage`` waits of a hung run, each with why it cannot end (the two
        deadlocks of tests/subagents/test_messaging_fuzz_findings.py), then the states."""
        messenger = messenger_of(self.manager.registry)
        waits = []
        for sender, receiver in messenger.waiting().items():
            up, ancestors = sender, set()
            while (up := messenger.parent_of(up)) is not None and up not in ancestors:
                ancestors.add(up)
            held = self.manager.registry.by_id(receiver)
            state = held.session.state if held is not None else self.main.state
            why = "on its ancestor" if receiver in ancestors else f"on a session {state}"
            waits.append(f"{sender} waits {why} {receiver}")
        return " | ".join([*waits, super().stuck()])

    def check(self, run: lf.Run) -> TeamRun:
        out = TeamRun(**asdict(super().check(run)))
        histories = dict(self.memory.consolidated) | {"main": self.main.messages}
        for problem in list(out.invalid):
            sid = problem.partition(": ")[0]
            if _at_limit(histories.get(sid, [])):
                out.invalid.remove(problem)
                out.stopped_at_limit.append(sid)
        with sqlite3.connect(self.store_path) as conn:
            audit = conn.execute(
                "SELECT id, old_owner, new_owner, old_status, new_status, open_deps "
                "FROM fuzz_audit ORDER BY seq"
            ).fetchall()
        for tid, old_owner, new_owner, old_status, new_status, open_deps in audit:
            where = f"#{tid} {old_owner}/{old_status} -> {new_owner}/{new_status}"
            if old_owner and new_owner and old_owner != new_owner:
                out.two_owners.append(where)
            taking = new_status == "in_progress" and (
                old_status != "in_progress" or old_owner != new_owner
            )
            if taking and open_deps:
                out.claimed_blocked.append(f"{where}, {open_deps} open")
            if new_status == "completed" and old_status != "completed" and open_deps:
                out.completed_blocked.append(f"{where}, {open_deps} open")
        histories = [*(m for _, m in self.memory.consolidated), self.main.messages]
        for messages in histories:
            self._tally_calls(messages, out)
        return out

    def _tally_calls(self, messages: Sequence[Message], out: TeamRun) -> None:
        results = {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}
        for m in messages:
            if not isinstance(m, AssistantMessage):
                continue
            for call in m.tool_calls:
                if call.name not in TEAM_TOOLS:
                    continue
                args = json.loads(call.arguments)
                kind = call.name
                if call.name == "TaskUpdate":
                    kind = f"TaskUpdate {args.get('status') or 'release'}"
                if call.name == SEND_TOOL_NAME:
                    kind = "SendMessage wait" if args.get("wait") else "SendMessage"
                result = results.get(call.id)
                outcome = _outcome(result)
                out.steps[f"{kind}: {outcome}"] += 1
                if kind == "SendMessage wait" and outcome == "unclear":
                    out.unclear_waits.append(result.content[:200] if result else "no result")

    @property
    def store_path(self) -> Path:
        return self.store.path


def _at_limit(messages: Sequence[Message]) -> bool:
    """A history whose only problem is that its last turn stopped at ``max_iterations``: it
    ends with a tool result that no cancel wrote (tests/subagents/
    test_messaging_fuzz_findings.py: the engine adds no closing reply there)."""
    last = messages[-1] if messages else None
    return (
        isinstance(last, ToolResultMessage)
        and "cancelled before it finished" not in last.content
        and lf.history_problems(messages) == ["end: the last turn was never answered"]
    )


def _outcome(result: ToolResultMessage | None) -> str:
    """How a team call ended, in a few words (``unclear``: no reply and no reason)."""
    if result is None:
        return "unclear"
    text = result.content
    if result.is_error:
        if "cancelled before it finished" in text:
            return "cut short"
        if "deadlock" in text or "may be waiting for you" in text:
            return "refused: would deadlock"
        if "owned by" in text:
            return "refused: owned by another"
        if "blocked by" in text:
            return "refused: blocked"
        return "refused" if text.strip() not in ("", "Error:") else "unclear"
    if text.startswith(("[reply from", "[session ")):
        return "replied"
    if text.startswith("[message delivered to"):
        return "delivered" if "]" in text else "unclear"
    return "done"


async def one_run(seed: int, kind: str, k: int = 0, max_delay: float = 0.002) -> TeamRun:
    faults = lf.Faults(random.Random(seed), max_delay=max_delay)
    moments, horizon = lf.aim(faults, kind, k)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_memory(Path(tmp) / "mem")
        try:
            with sqlite3.connect(store.path) as conn:
                conn.executescript(AUDIT)
            scenario = TeamScenario(faults, Path(tmp), store)
            run = await scenario.play(moments, horizon, talk=kind == "talk")
        finally:
            store.close()
    assert isinstance(run, TeamRun)
    return run


@dataclass
class Tally(lf.Tally):
    two_owners: int = 0
    claimed_blocked: int = 0
    completed_blocked: int = 0
    unclear_waits: int = 0
    stopped_at_limit: int = 0
    hangs_by_wait: dict[str, int] = field(default_factory=dict)  # the waits of hung runs
    steps: dict[str, int] = field(default_factory=dict)

    def add(self, run: lf.Run, label: str) -> None:
        assert isinstance(run, TeamRun)
        super().add(run, label)
        self.two_owners += len(run.two_owners)
        self.claimed_blocked += len(run.claimed_blocked)
        self.completed_blocked += len(run.completed_blocked)
        self.unclear_waits += len(run.unclear_waits)
        self.stopped_at_limit += len(run.stopped_at_limit)
        if run.hung:
            waits = sorted(set(re.findall(r"waits (on its ancestor|on a session \w+)", run.stuck)))
            key = ", ".join(waits) or "no SendMessage wait"
            self.hangs_by_wait[key] = self.hangs_by_wait.get(key, 0) + 1
        for step, n in run.steps.items():
            self.steps[step] = self.steps.get(step, 0) + n


KINDS = (("none", "team steps only, random delays"), *lf.RANDOM_KINDS[:3])  # no approvals


async def campaign(
    random_runs: int, seed: int = 31, max_delay: float = 0.002, sweep_step: int = 1
) -> dict[str, Tally]:
    """The lifecycle attacks (``lifecycle_fuzz.campaign``) with team work."""
    return await lf.campaign(random_runs, seed, max_delay, sweep_step=sweep_step,
                             play=one_run, tally=Tally, kinds=KINDS)  # fmt: skip


FAILURES = ("hangs", "runs_with_orphans", "lost_consolidations", "double_consolidations",
            "leaked_tasks", "invalid_histories", "two_owners", "claimed_blocked",
            "completed_blocked", "unclear_waits")  # fmt: skip


def failures(t: Tally) -> int:
    """Everything the checks found in ``t`` (``stopped_at_limit`` is reported apart)."""
    return sum(getattr(t, name) for name in FAILURES)


def main(argv: list[str] | None = None) -> int:
    return lf.cli(argv, description="Lifecycle fuzzing with messages and tasks", seed=31,
                  random_runs=250, quick_runs=10, fuzz=campaign, results=RESULTS,
                  failed=failures)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
