"""Durable sessions under random process kills (issue 30): the lifecycle fuzz with restarts.

A nested scenario runs with durable sessions on (``record_conversation`` on the main
conversation; the memory store is SQLite in a temporary folder, or a throwaway PostgreSQL
server): ``main`` does a step with a side effect (``Bump``) and opens interactive ``a``,
whose ``b`` does a ``Guarded`` step and a ``Bump`` and asks ``a`` a question that ``a``
answers; ``main`` runs ``c`` one-shot, which asks ``main`` (and is then held), is answered
and does a ``Guarded`` step and a ``Bump``; ``main`` sends ``a`` a background turn, steers
it and waits for it, while ``a`` does the same to ``b``; on its second message ``main`` asks
the user a question, does a ``Bump`` and unloads ``c``; then the user ends the conversation.
Every model is a ``ScriptedModel`` answering from its conversation (so a restored one goes
on where its history stands), with random latency; consolidation awaits a random delay. A
parent whose ``SubAgent`` call a restart cut short first asks ``SubAgentStatus`` (waiting),
as the cut call's result advises; "naive" parents go straight on.

**A kill.** A "process" is a :class:`~retinue.runtime.Runtime` on the shared data folder.
It is killed at a tick (a model call, a side effect, a journal write, before or after it
lands, a consolidation, right after it is counted, or an approval request) or at a random
moment. From then on it is *dead* (its journal writes and forgets are dropped, its tools
have no effect, its consolidations do not count; what it had in flight in the store lands,
as a commit would); ``suspend_tree`` lets go of its tasks, a fresh runtime on the same
folder restores the tree (``restore_conversation``), and the user goes on: answers the main
question if one is pending, waits for a main turn that goes on, sends the next message of
the script that the history does not hold yet (a message lost with the process is sent
again, as a client would), and ends the conversation (again, if it was ending). One attack
also steers working sessions and answers pending questions from outside; one interrupts
running turns; one has every ``Guarded`` call wait for a random yes or no.

After every run: no hang (:data:`HANG_AFTER`); every session that began (its model was
called in a live process) consolidated exactly once over all processes together; no
``Bump`` or ``Guarded`` call id with more than one side effect (no step done twice); every
history valid (each consolidated one and the main one,
:func:`~retinue.messages.history_problems`); no record left in the journal; no task left
running; no session that a kill's ``suspend_tree`` left held
(``tests/durable/test_fuzz_letgo.py``); no restore that failed.

    uv run python benchmarks/durable_fuzz.py            # the long version (~1,000 runs)
    uv run python benchmarks/durable_fuzz.py --quick    # CI size, SQLite only

Results go to ``benchmarks/results/lifecycle_fuzz_durable.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retinue.config import Settings
from retinue.durable import (
    RESTARTED_RESULT,
    record_conversation,
    restore_conversation,
    suspend_tree,
)
from retinue.engine.loop import STEERING_NOTE
from retinue.engine.session import current_session
from retinue.llm.base import Model, ToolSpec
from retinue.memory import PostgresMemory
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.runtime import Conversation, Runtime
from retinue.store.journal import SessionJournal, SessionRecord
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import tool

# the id a durable session's consolidation runs under (kept in its record), where the
# memory package has it: a consolidation run again under a committed id is not applied twice
CONSOLIDATION_RUN: ContextVar[str | None] | None = getattr(
    importlib.import_module("retinue.memory.consolidate"), "consolidation_run", None
)
RESULTS = Path(__file__).resolve().parent / "results" / "lifecycle_fuzz_durable.json"
HANG_AFTER = 10.0  # seconds a run may take before it counts as hung
USER = ("go", "next")  # the user's messages, in order
ANSWER = "the answer is blue"  # the user's answer to the main agent's question
STEERED = STEERING_NOTE.split("{")[0]  # how a steering message (not a turn) begins
CHECK = "|check"  # the call id's end of a check after a restart (not a step of the plan)

Plan = list[list[tuple[str, dict[str, Any]] | str]]


def _i(role: str, task: str, **kw: Any) -> tuple[str, dict[str, Any]]:
    return ("SubAgent", {"role": role, "interactive": True, "task": task, **kw})


# per role: the steps of each turn (the last turn's plan repeats); a str ends the turn
PLANS: dict[str, Plan] = {
    "main": [
        [
            ("Bump", {}),
            _i("a", "a, start"),
            ("SubAgent", {"role": "c", "task": "c, one-shot"}),
            _i("c", "c, the answer is 42"),
            _i("a", "a, more", background=True),
            _i("a", "a, mind the steering", steer=True),
            ("SubAgentStatus", {"role": "a", "wait": True}),
            "main done",
        ],
        [
            ("AskParent", {"question": "user, which one?"}),
            ("Bump", {}),
            ("UnloadSubAgent", {"role": "c"}),
            "main done again",
        ],
    ],
    "a": [
        [_i("b", "b, start"), _i("b", "b, the answer is 7"), "a paused"],
        [
            ("Bump", {}),
            _i("b", "b, more", background=True),
            _i("b", "b, mind the steering", steer=True),
            ("SubAgentStatus", {"role": "b", "wait": True}),
            "a again",
        ],
    ],
    "b": [
        [
            ("Guarded", {}),
            ("Bump", {}),
            ("AskParent", {"question": "b, which answer?"}),
            "b paused",
        ],
        [("Bump", {}), "b done"],
    ],
    "c": [
        [("AskParent", {"question": "c, which answer?"}), ("Guarded", {}), ("Bump", {}), "c done"]
    ],
}
ASKS = frozenset({"ask_parent"})
ROLES = [
    Role("a", "the a role", "You are a.", None, "scripted:a", frozenset({"spawn_agent"})),
    Role("b", "the b role", "You are b.", None, "scripted:b", ASKS),
    Role("c", "the c role", "You are c.", None, "scripted:c", ASKS),
]


def _position(messages: Sequence[Message]) -> tuple[int, int]:
    """(turn, step) of the next reply: turns are the user messages that are not steering;
    the step counts the replies since the turn's message (a check after a restart aside)."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, UserMessage) and not m.content.startswith(STEERED)
    ]
    if not starts:
        return 0, 0
    step = sum(
        isinstance(m, AssistantMessage)
        and not (m.tool_calls and m.tool_calls[0].id.endswith(CHECK))
        for m in messages[starts[-1] :]
    )
    return len(starts) - 1, step


def _check_after_restart(messages: Sequence[Message]) -> dict[str, Any] | None:
    """The arguments of ``SubAgentStatus`` if the last message says a ``SubAgent`` call was
    cut short by a restart: a model that does what :data:`RESTARTED_RESULT` advises asks
    for the session's reply (waiting for it) before it goes on."""
    last = messages[-1] if messages else None
    if not (isinstance(last, ToolResultMessage) and last.content == RESTARTED_RESULT):
        return None
    for m in reversed(messages):
        if isinstance(m, AssistantMessage):
            call = next((c for c in m.tool_calls if c.id == last.tool_call_id), None)
            if call is None or call.name != "SubAgent":
                return None
            args = json.loads(call.arguments)
            return {"role": args["role"], "instance": args.get("instance"), "wait": True}
    return None


class Journal:
    """One process's view of the shared journal: nothing written or forgotten once it is
    dead (what it had in flight lands); each write or forget is a tick that may kill."""

    def __init__(self, real: SessionJournal, process: Process) -> None:
        self.real, self.process = real, process
        self.in_flight: set[asyncio.Task[Any]] = set()  # the tasks writing now

    async def _through(self, work: Callable[[], Any]) -> Any:
        fuzz, process = self.process.fuzz, self.process
        if process.dead:
            return None
        kill = fuzz.tick(process)
        if kill and fuzz.rng.random() < 0.5:  # dies before it lands
            fuzz.kill(process, "before a journal write")
            return None
        me = asyncio.current_task()
        assert me is not None
        self.in_flight.add(me)
        try:
            return await work()
        finally:
            self.in_flight.discard(me)
            if kill:  # dies right after it landed
                fuzz.kill(process, "after a journal write")

    async def record(
        self, tenant: str, rec: SessionRecord, messages: Sequence[Message], *, keep: int = 0
    ) -> None:
        await self._through(lambda: self.real.record(tenant, rec, messages, keep=keep))

    async def forget(self, tenant: str, session_id: str) -> bool:
        return bool(await self._through(lambda: self.real.forget(tenant, session_id)))

    async def load_tree(self, tenant: str, root: str) -> list[tuple[SessionRecord, list[Message]]]:
        return await self.real.load_tree(tenant, root)

    async def load(
        self, tenant: str, session_id: str
    ) -> tuple[SessionRecord, list[Message]] | None:
        return await self.real.load(tenant, session_id)

    async def forget_tree(self, tenant: str, root: str) -> int:
        return int(await self._through(lambda: self.real.forget_tree(tenant, root)) or 0)

    async def records(self, tenant: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        return await self.real.records(tenant, limit)

    async def stale(self, older_than: float, limit: int = 100) -> list[tuple[str, str]]:
        return await self.real.stale(older_than, limit)

    async def prune(self, older_than: float) -> int:
        return await self.real.prune(older_than)

    async def consolidated(self, run_id: str) -> bool:
        """Whether a consolidation ran as ``run_id`` was committed (by :class:`Memory`)."""
        return run_id in self.process.fuzz.committed_runs

    async def drained(self) -> None:
        """Wait until what the process had in flight in the store has landed."""
        if self.in_flight:
            await asyncio.wait(set(self.in_flight))


class Memory:
    """The memory a process's sub-agents consolidate into: counted while the process lives
    (over all processes together), after a random delay like a real store's; as the real
    store does, a run id already committed (a close finished again after a restart) is not
    applied twice."""

    def __init__(self, process: Process) -> None:
        self.process = process

    async def render(self, tenant: str, role: str) -> str:
        await asyncio.sleep(self.process.fuzz.delay())
        return f"## Memory of {role}"

    async def consolidate(
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> bool:
        fuzz, process = self.process.fuzz, self.process
        run_id = CONSOLIDATION_RUN.get() if CONSOLIDATION_RUN is not None else None
        await asyncio.sleep(fuzz.delay())
        if process.dead:
            return True  # a dead process writes nothing
        if run_id is not None:  # as the store: a run already committed is not applied twice
            if run_id in fuzz.committed_runs:
                return True
            fuzz.committed_runs.add(run_id)
        fuzz.consolidated.append((session_id, list(messages)))
        fuzz.consolidated_by.append((session_id, fuzz.processes.index(process)))
        if fuzz.tick(process):
            fuzz.kill(process, "after a consolidation")
        return True


class Process:
    """One "process": a runtime on the shared data folder and its main conversation."""

    def __init__(self, fuzz: Fuzz) -> None:
        self.fuzz = fuzz
        self.dead = False
        self.started = asyncio.Event()
        self.driver: asyncio.Task[None] | None = None
        models = {name: self._model(name) for name in PLANS}
        settings = Settings.load(home=fuzz.folder / "home", workspace=fuzz.folder)
        settings.database_url = fuzz.database_url
        process = self

        @tool("Bump")
        async def bump(label: str) -> str:
            """Do something that must not be done twice (its label is its call id)."""
            process.effect(label)
            return f"bumped {label}"

        @tool("Guarded")
        async def guarded(label: str) -> str:
            """Like Bump, but asks a person's yes first when the run has approvals."""
            process.effect(label)
            return f"guarded {label}"

        self.runtime = Runtime.create(
            settings,
            model=models["main"],
            model_for=lambda spec: models[spec.removeprefix("scripted:")],
            builtins=False,
            extra_tools=[bump, guarded],
            roles=ROLES,
        )
        if fuzz.approvals:  # every Guarded call, at any depth, asks first
            rules = RuleSet()
            rules.add("ask", ["Guarded"], fuzz.folder)
            self.runtime.policy = Policy(
                modes=("bypassPermissions",), rules=rules, approver=self._approve
            )
        store = self.runtime.memory
        assert store is not None
        self.store = store
        self.runtime.manager.factory.memory = Memory(self)  # type: ignore[assignment]
        self.journal = Journal(store.journal, self)
        self.tenant = settings.tenant
        self.conversation: Conversation = self.runtime.conversation(fuzz.root, keep_sessions=True)

    def effect(self, label: str) -> None:
        """A side effect (of call ``label``), if this process lives; it may die right after."""
        if not self.dead:
            self.fuzz.effects[label] += 1
            if self.fuzz.tick(self):
                self.fuzz.kill(self, "after a side effect")

    async def close(self) -> None:
        """Close its store (a SQLite file, or a pool of PostgreSQL connections)."""
        if isinstance(self.store, PostgresMemory):
            await self.store.aclose()
        else:
            self.store.close()

    async def _approve(self, request: ApprovalRequest) -> Approval:
        """A person's answer, a yes or a no, after a while (the process may die meanwhile)."""
        fuzz = self.fuzz
        if fuzz.tick(self):
            fuzz.kill(self, "while an approval is pending")
        await asyncio.sleep(fuzz.rng.uniform(0, 0.005))
        fuzz.answered += not self.dead
        return Approval(fuzz.rng.random() < 0.5, message="denied by the fuzz")

    def _model(self, name: str) -> ScriptedModel:
        plan, fuzz = PLANS[name], self.fuzz

        def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
            model.delay = fuzz.delay()
            session = current_session()
            sid = session.id if session is not None else name
            if not self.dead:
                fuzz.began.add(sid)
                if fuzz.tick(self):
                    fuzz.kill(self, "in a model call")
            turn, step = _position(messages)
            check = _check_after_restart(messages) if fuzz.polite else None
            if check is not None:
                args = {k: v for k, v in check.items() if v is not None}
                return call_tool("SubAgentStatus", args, id=f"{sid}|t{turn}|s{step}{CHECK}")
            steps = plan[min(turn, len(plan) - 1)]
            what = steps[min(step, len(steps) - 1)]
            if isinstance(what, str):
                return what
            call_id = f"{sid}|t{turn}|s{step}"
            tool_name, args = what
            if tool_name in ("Bump", "Guarded"):
                args = {"label": call_id}
            return call_tool(tool_name, args, id=call_id)

        model = ScriptedModel(name=f"scripted:{name}", responder=respond, record=False)
        return model


@dataclass
class Run:
    """One run of the scenario and what was checked after it."""

    kills: int = 0
    killed_at: list[str] = field(default_factory=list[str])
    hung: bool = False
    talks: int = 0  # steering and answers from outside taken
    approvals: int = 0  # approval requests answered
    lost: list[str] = field(default_factory=list[str])  # began, never consolidated
    doubled: list[str] = field(default_factory=list[str])  # consolidated more than once
    doubled_in_one: list[str] = field(default_factory=list[str])  # ... by one process
    twice: list[str] = field(default_factory=list[str])  # Bump call ids with two effects
    invalid: list[str] = field(default_factory=list[str])  # histories with problems
    records_left: list[str] = field(default_factory=list[str])
    leaked_tasks: list[str] = field(default_factory=list[str])
    not_let_go: list[str] = field(default_factory=list[str])  # held after suspend_tree
    errors: list[str] = field(default_factory=list[str])  # restores or kills that failed
    sessions: int = 0
    ticks: int = 0
    effects: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.hung
            or self.lost
            or self.doubled
            or self.twice
            or self.invalid
            or self.records_left
            or self.leaked_tasks
            or self.not_let_go
            or self.errors
        )


class Fuzz:
    """One run: the processes one after another, the kills, and what they all did."""

    def __init__(
        self,
        folder: Path,
        seed: int,
        attack: Attack,
        *,
        max_delay: float = 0.002,
        database_url: str | None = None,
    ) -> None:
        self.folder, self.rng, self.max_delay = folder, random.Random(seed), max_delay
        self.root = f"conv-{seed}"  # (one store may serve many runs: PostgreSQL)
        self.database_url = database_url
        self.polite, self.talk_rate, self.talk_kinds = attack.polite, attack.talk_rate, attack.talks
        self.approvals = attack.approvals  # Guarded calls ask (Attack.approvals)
        self.kill_ticks, self.moments = frozenset(attack.kill_ticks), sorted(attack.moments)
        self.ticks = 0
        self.kills = 0
        self.finished = False
        self.ending = False  # the user asked to end the conversation
        self.done = asyncio.Event()
        self.current: Process | None = None
        self.processes: list[Process] = []
        self.began: set[str] = set()
        self.effects: Counter[str] = Counter()
        self.consolidated: list[tuple[str, list[Message]]] = []
        self.consolidated_by: list[tuple[str, int]] = []  # (session, process number)
        self.committed_runs: set[str] = set()  # the consolidation run ids committed
        self.errors: list[str] = []
        self.talks = 0  # steering and answers from outside that were taken
        self.answered = 0  # approval requests answered by a live process
        self.not_let_go: list[str] = []  # sessions a kill's suspend_tree left held
        self.killed_at: list[str] = []
        self._killers: set[asyncio.Task[None]] = set()

    def delay(self) -> float:
        return self.rng.uniform(0, self.max_delay) if self.max_delay else 0.0

    def tick(self, process: Process) -> bool:
        """Count a tick of a live process; True if the process dies at it."""
        if process.dead or self.finished:
            return False
        self.ticks += 1
        if self.talk_rate and self.rng.random() < self.talk_rate:
            what = self.rng.choice(self.talk_kinds)
            asyncio.get_running_loop().call_soon(self._talk, process, what)
        return self.ticks in self.kill_ticks

    def kill(self, process: Process, where: str) -> None:
        """``process`` is dead from now on (``where``: at what); it is let go of and another
        takes over."""
        if process.dead or self.finished:
            return
        process.dead = True
        self.killed_at.append(f"{where}@{self.ticks}")
        task = asyncio.create_task(self._restart(process))
        self._killers.add(task)
        task.add_done_callback(self._killers.discard)

    async def _restart(self, process: Process) -> None:
        try:
            await process.started.wait()
            if process.driver is not None:
                process.driver.cancel()
                await asyncio.wait({process.driver})
            await suspend_tree(process.conversation)
            registry = process.runtime.manager.registry
            for held in list(registry.held_by(None)):  # not let go of: counted, then let go
                self.not_let_go.append(held.id)
                await held.session.suspend()
                registry.forget(held)
            await process.journal.drained()
            self.kills += 1
            await self.start(restore=True)
        except Exception as exc:  # a bug: reported, and the run ends
            self.errors.append(f"restart after kill {self.kills}: {type(exc).__name__}: {exc}")
            self.done.set()

    async def start(self, *, restore: bool) -> None:
        process = Process(self)
        self.current = process
        self.processes.append(process)
        conversation = process.conversation
        try:
            if restore:
                await restore_conversation(conversation, process.journal, process.tenant, None)
            else:
                record_conversation(conversation, process.journal, process.tenant)
        finally:
            process.driver = asyncio.create_task(self._drive(process))
            process.started.set()

    async def _drive(self, process: Process) -> None:
        """The user: answer, wait, send the next message, end (see the module docstring)."""
        conversation = process.conversation
        session = conversation.session
        while not self.ending:
            if session.state == "asking":
                await conversation.send(ANSWER)
            elif session.tasks():  # a turn that goes on (it may come to ask: look again)
                await asyncio.wait(session.tasks(), timeout=0.05)
            else:
                sent = sum(
                    isinstance(m, UserMessage) and m.content in USER for m in session.messages
                )
                if sent >= len(USER):
                    break
                await conversation.send(USER[sent])
        self.ending = True
        await conversation.close()
        if not process.dead:
            self.finished = True
            self.done.set()

    async def _at_moments(self) -> None:
        """At each moment: kill the current process, or (as a person over HTTP would) steer
        a working session or answer a pending question from outside its parent."""
        started = asyncio.get_running_loop().time()
        for at, what in self.moments:
            await asyncio.sleep(max(0.0, at - (asyncio.get_running_loop().time() - started)))
            process = self.current
            if process is None or process.dead or self.finished:
                continue
            if what == "kill":
                self.kill(process, "at a moment")
            else:
                self._talk(process, what)

    def _talk(self, process: Process, what: str) -> None:
        """Steer a working session ("steer"), answer a pending question ("answer") or
        interrupt a running turn ("interrupt": a sub-agent's, else the main one's) from
        outside, as a person over HTTP would."""
        if process.dead or self.finished:
            return
        manager = process.runtime.manager
        state = "asking" if what == "answer" else "running"
        live = [s.id for s in manager.sessions() if s.state == state]
        sid = self.rng.choice(live) if live else None
        if what == "interrupt":
            main = process.conversation.session
            self.talks += manager.interrupt(sid) if sid is not None else main.interrupt()
        elif sid is not None and what == "steer":
            self.talks += manager.steer_session(sid, "steered from outside")
        elif sid is not None:
            self.talks += manager.answer(sid, "answered from outside")

    async def play(self) -> Run:
        self._before = asyncio.all_tasks()  # (a hung run before this one may leave some)
        timer = asyncio.create_task(self._at_moments()) if self.moments else None
        await self.start(restore=False)
        try:
            await asyncio.wait_for(self.done.wait(), HANG_AFTER)
            hung = False
        except TimeoutError:
            hung = True
        self.finished = True
        if timer is not None:
            timer.cancel()
            await asyncio.wait({timer})
        run = Run(self.kills, self.killed_at, hung=hung, errors=list(self.errors))
        run.talks, run.not_let_go, run.approvals = self.talks, self.not_let_go, self.answered
        await self._check(run)
        await self._let_go()
        await asyncio.sleep(0.01)  # what was let go of finishes
        me = asyncio.current_task()
        leaked = [t for t in asyncio.all_tasks() - self._before if t is not me and not t.done()]
        run.leaked_tasks = [f"{t.get_name()}: {t.get_coro()}" for t in leaked]
        return run

    async def _check(self, run: Run) -> None:
        counts = Counter(sid for sid, _ in self.consolidated)
        main = self.processes[-1]
        began = self.began - {self.root}  # (the main conversation does not consolidate)
        run.sessions = len(began)
        run.lost = sorted(s for s in began if counts[s] == 0)
        run.doubled = sorted(s for s, n in counts.items() if n > 1)
        run.doubled_in_one = sorted(
            {s for (s, _), n in Counter(self.consolidated_by).items() if n > 1}
        )
        run.twice = sorted(c for c, n in self.effects.items() if n > 1)
        run.ticks, run.effects = self.ticks, sum(self.effects.values())
        histories = [*self.consolidated, (self.root, main.conversation.messages)]
        run.invalid = [f"{sid}: {p[0]}" for sid, m in histories if (p := _problems(m))]
        left = await main.store.journal.load_tree(main.tenant, self.root)
        run.records_left = [record.id for record, _ in left]

    async def _let_go(self) -> None:
        for process in self.processes:
            if process.driver is not None and not process.driver.done():
                process.driver.cancel()
            await suspend_tree(process.conversation)
            await process.close()


def _problems(messages: list[Message]) -> list[str]:
    """A history is valid if it is empty, only a system prompt, or a valid conversation."""
    if all(isinstance(m, SystemMessage) for m in messages):
        return []
    return history_problems(messages)


@dataclass(frozen=True)
class Attack:
    """What one run does: kills at these ticks, and at these moments (seconds after the
    start) a "kill", a "steer" or an "answer" from outside; ``polite``: a parent whose
    ``SubAgent`` call a restart cut short checks the session (``SubAgentStatus``, waiting)
    before it goes on, as :data:`RESTARTED_RESULT` advises."""

    kill_ticks: tuple[int, ...] = ()
    moments: tuple[tuple[float, str], ...] = ()
    polite: bool = True
    talk_rate: float = 0.0  # at each tick, the chance of one of ``talks`` (see Fuzz._talk)
    talks: tuple[str, ...] = ("steer", "answer")
    approvals: bool = False  # Guarded calls wait for a random yes or no


async def one_run(
    seed: int, attack: Attack, *, max_delay: float = 0.002, database_url: str | None = None
) -> Run:
    with tempfile.TemporaryDirectory(prefix="durable-fuzz-") as tmp:
        fuzz = Fuzz(Path(tmp), seed, attack, max_delay=max_delay, database_url=database_url)
        return await fuzz.play()


@dataclass
class Tally:
    runs: int = 0
    kills: int = 0
    hangs: int = 0
    lost_consolidations: int = 0
    double_consolidations: int = 0
    double_consolidations_in_one_process: int = 0
    steps_done_twice: int = 0
    invalid_histories: int = 0
    records_left: int = 0
    leaked_tasks: int = 0
    sessions_not_let_go: int = 0
    errors: int = 0
    sessions: int = 0
    side_effects: int = 0
    talks: int = 0
    approvals: int = 0
    examples: list[str] = field(default_factory=list[str])

    def add(self, run: Run, label: str) -> None:
        self.runs += 1
        self.kills += run.kills
        self.hangs += run.hung
        self.lost_consolidations += len(run.lost)
        self.double_consolidations += len(run.doubled)
        self.double_consolidations_in_one_process += len(run.doubled_in_one)
        self.steps_done_twice += len(run.twice)
        self.invalid_histories += len(run.invalid)
        self.records_left += len(run.records_left)
        self.leaked_tasks += len(run.leaked_tasks)
        self.sessions_not_let_go += len(run.not_let_go)
        self.errors += len(run.errors)
        self.sessions += run.sessions
        self.side_effects += run.effects
        self.talks += run.talks
        self.approvals += run.approvals
        if not run.ok and len(self.examples) < 5:
            self.examples.append(f"{label}: {run}")

    @property
    def failures(self) -> int:
        return (
            self.hangs
            + self.lost_consolidations
            + self.double_consolidations
            + self.steps_done_twice
            + self.invalid_histories
            + self.records_left
            + self.leaked_tasks
            + self.sessions_not_let_go
            + self.errors
        )


async def campaign(
    random_runs: int,
    seed: int = 30,
    max_delay: float = 0.002,
    sweep_step: int = 1,
    database_url: str | None = None,
    naive_runs: int = 0,
) -> dict[str, Tally]:
    """The undisturbed run (its ticks give the range of kill points); one kill at every
    ``sweep_step``-th tick; then ``random_runs`` runs each of one, two and three kills at
    random ticks, of two kills at random moments, and of two kills at random ticks with
    steering or outside answers at a tenth of the ticks, with interrupts at a twentieth, and
    with every ``Guarded`` call waiting for a random yes or no; and ``naive_runs`` runs of one
    kill at a random tick with parents that do not check a call cut short (where a message
    queued behind a revived turn that then asks used to wait for ever:
    ``tests/durable/test_fuzz_findings.py``)."""

    async def run(seed: int, attack: Attack) -> Run:
        return await one_run(seed, attack, max_delay=max_delay, database_url=database_url)

    baseline = await one_run(seed, Attack(), max_delay=0, database_url=database_url)
    ticks = baseline.ticks
    tallies: dict[str, Tally] = {"undisturbed": Tally()}
    tallies["undisturbed"].add(baseline, "undisturbed")
    sweep = tallies[f"one kill at tick k, k = 1..{ticks}"] = Tally()
    for k in range(1, ticks + 1, sweep_step):
        sweep.add(await run(seed + k, Attack((k,))), f"tick {k} (seed {seed + k})")
    for kills in (1, 2, 3):
        tally = tallies[f"{kills} kill(s) at random ticks"] = Tally()
        for i in range(random_runs):
            rng = random.Random(seed * 1000 + kills * 100_000 + i)
            at = tuple(sorted(rng.sample(range(1, ticks * (kills + 1) // 2 + 1), kills)))
            one = rng.randrange(1 << 30)
            tally.add(await run(one, Attack(at)), f"ticks {at} (seed {one})")
    horizon = baseline_seconds(ticks, max_delay)
    tally = tallies["2 kills at random moments"] = Tally()
    for i in range(random_runs):
        rng = random.Random(seed * 7919 + i)
        moments = tuple((round(rng.uniform(0, horizon), 4), "kill") for _ in range(2))
        one = rng.randrange(1 << 30)
        tally.add(await run(one, Attack(moments=moments)), f"{moments} (seed {one})")
    two_kills: dict[str, tuple[int, dict[str, Any]]] = {  # label: (seed salt, Attack options)
        "steering or outside answers at 10% of ticks": (6007, {"talk_rate": 0.1}),
        "interrupts at 5% of ticks": (3301, {"talk_rate": 0.05, "talks": ("interrupt",)}),
        "approvals pending, yes or no at random": (5501, {"approvals": True}),
    }
    for label, (salt, options) in two_kills.items():
        tally = tallies[f"2 kills at random ticks, {label}"] = Tally()
        for i in range(random_runs):
            rng = random.Random(seed * salt + i)
            at = tuple(sorted(rng.sample(range(1, ticks * 3 // 2 + 1), 2)))
            one = rng.randrange(1 << 30)
            tally.add(await run(one, Attack(at, **options)), f"ticks {at} (seed {one})")
    if naive_runs:
        tally = tallies["naive parents, one kill at a random tick"] = Tally()
        for i in range(naive_runs):
            rng = random.Random(seed * 4271 + i)
            at, one = (rng.randrange(1, ticks + 1),), rng.randrange(1 << 30)
            tally.add(await run(one, Attack(at, polite=False)), f"ticks {at} (seed {one})")
    return tallies


def baseline_seconds(ticks: int, max_delay: float) -> float:
    """A rough length of a run: each tick awaits half the largest delay on average."""
    return max(0.02, ticks * max_delay / 2)


def _report(tallies: dict[str, Tally], seconds: float) -> dict[str, Any]:
    return {
        "runs": sum(t.runs for t in tallies.values()),
        "kills": sum(t.kills for t in tallies.values()),
        "seconds": seconds,
        "attacks": {name: asdict(t) for name, t in tallies.items()},
    }


def _postgres() -> tuple[Any, str]:
    """A throwaway PostgreSQL server (the tests' helper) and the URL of a fresh database."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    pgserver = importlib.import_module("pgserver")
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL is not installed")
    server = pgserver.PgServer(bin_dir).start()
    return server, server.create_database("durable_fuzz")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Durable sessions under random process kills")
    parser.add_argument("--quick", action="store_true", help="CI size, not the full run")
    parser.add_argument("--random-runs", type=int, default=120)
    parser.add_argument("--naive-runs", type=int, default=120)
    parser.add_argument("--postgres-runs", type=int, default=20, help="0: SQLite only")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--max-delay", type=float, default=0.002, help="seconds, model/memory")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.getLogger("retinue").setLevel(logging.CRITICAL)  # dropped writes are expected
    quick = args.quick
    random_runs = 5 if quick else args.random_runs
    delay = args.max_delay
    report: dict[str, Any] = {
        "seed": args.seed,
        "max_delay": delay,
        "python": sys.version.split()[0],
    }
    started = time.perf_counter()
    sqlite = asyncio.run(
        campaign(random_runs, args.seed, delay, sweep_step=7 if quick else 1,
                 naive_runs=0 if quick else args.naive_runs)
    )  # fmt: skip
    report["sqlite"] = _report(sqlite, round(time.perf_counter() - started, 1))
    tallies = list(sqlite.values())
    if args.postgres_runs and not quick:
        server, url = _postgres()
        try:
            started = time.perf_counter()
            pg = asyncio.run(
                campaign(args.postgres_runs, args.seed, delay, sweep_step=5, database_url=url)
            )
        finally:
            server.stop()
        report["postgresql"] = _report(pg, round(time.perf_counter() - started, 1))
        tallies += pg.values()
    if not quick:
        args.out.parent.mkdir(exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 1 if any(t.failures for t in tallies) else 0


if __name__ == "__main__":
    raise SystemExit(main())
