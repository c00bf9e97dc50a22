"""Lifecycle fuzzing: the nested interactive scenario under random cancels, interrupts and faults.

The scenario (issues 11 and 17): ``main`` opens ``a`` and ``a:x``; each ``a`` opens ``b``; ``b``
opens ``c``; ``c`` asks its parent a question (``AskParent``) on every turn and ``b`` answers it;
``main`` also runs ``c`` one-shot, which asks too, and answers it (the one-shot is then held
like an interactive session); on its second turn ``a`` sends to ``b`` in the background, steers
it, and waits for the reply, and ``b`` unloads ``c``; ``main`` unloads ``a:x`` and ends (its
sessions are cleaned up). Every
model is the shipped ``ScriptedModel`` answering from the conversation, with random latency;
the memory's ``render`` and ``consolidate`` await random delays like real ones.

Attacks: a model error at global model call k, a cancel of the main run at call k, an
interrupt of a running session at call k, one or two cancels/interrupts at random moments, and
three random moments that may also steer a working session or answer a pending question from
outside its parent.
After every run: no hang, no session left, every session created consolidated exactly once,
no task left running, every history (each consolidated one and the main one) valid.

    uv run python benchmarks/lifecycle_fuzz.py            # the long version (>= 2,000 runs)
    uv run python benchmarks/lifecycle_fuzz.py --quick    # a few seconds

Results go to ``benchmarks/results/lifecycle_fuzz.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retinue.engine import RunConfig
from retinue.engine.session import Lifecycle, Session
from retinue.errors import ModelError
from retinue.events import SESSION, Event
from retinue.llm.base import Model, ToolSpec
from retinue.memory.base import Memory
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    UserMessage,
    history_problems,
)
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.subagents import FanOutLimits, Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import Tool, ToolContext, ToolRegistry, tool

RESULTS = Path(__file__).resolve().parent / "results" / "lifecycle_fuzz.json"
SPAWN = frozenset({"spawn_agent"})
HANG_AFTER = 10.0  # seconds a run may take before it counts as hung


def _i(role: str, **kw: Any) -> AssistantMessage:
    return call_tool("SubAgent", {"role": role, "interactive": True, **kw})


def _ask(question: str) -> AssistantMessage:
    return call_tool("AskParent", {"question": question})


@tool("Guarded")
async def guarded(note: str) -> str:
    """A call that needs a person's yes when the scenario runs with approvals."""
    return f"guarded: {note}"


# per role: the steps of each turn (the last turn's plan repeats); a str ends the turn
PLANS: dict[str, list[list[Any]]] = {
    "main": [
        [
            _i("a", task="a, start"),
            _i("a", task="a:x, start", instance="x"),
            call_tool("SubAgent", {"role": "c", "task": "c, one-shot"}),
            _i("c", task="c, the answer is 42"),
            _i("a", task="a, go on"),
            call_tool("UnloadSubAgent", {"role": "a", "instance": "x"}),
            "main done",
        ]
    ],
    "a": [
        [_i("b", task="b, start"), "a paused"],
        [
            _i("b", task="b, in the background", background=True),
            _i("b", task="b, mind the steering", steer=True),
            call_tool("SubAgentStatus", {"role": "b", "wait": True}),
            "a again",
        ],
    ],
    "b": [
        [
            call_tool("Guarded", {"note": "b"}),
            _i("c", task="c, hello"),
            _i("c", task="c, the answer is b"),
            "b paused",
        ],
        [call_tool("UnloadSubAgent", {"role": "c"}), "b done"],
    ],
    "c": [[call_tool("Guarded", {"note": "c"}), _ask("c, which answer?"), "c says hi"]],
}


@dataclass
class Faults:
    """What one run does to the scenario (chosen from the seed)."""

    rng: random.Random
    max_delay: float = 0.002
    fault_at: int | None = None  # a model error at this global model call
    cancel_at: int | None = None  # cancel the main run at this call
    interrupt_at: int | None = None  # interrupt a running session at this call
    calls: int = 0

    def delay(self) -> float:
        return self.rng.uniform(0, self.max_delay) if self.max_delay else 0.0


class FuzzMemory:
    """Records consolidations; its calls await random delays like a real store's."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.consolidated: list[tuple[str, list[Message]]] = []

    async def render(self, tenant: str, role: str) -> str:
        await asyncio.sleep(self.faults.delay())
        return f"## Memory of {role}"

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
    ) -> bool:
        await asyncio.sleep(self.faults.delay())
        self.consolidated.append((session_id, list(messages)))
        return True


@dataclass
class Run:
    """One run of the scenario and what was checked after it."""

    hung: bool = False
    orphans: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # created, never consolidated
    doubled: list[str] = field(default_factory=list)  # consolidated more than once
    leaked_tasks: int = 0
    invalid: list[str] = field(default_factory=list)  # histories with problems
    sessions: int = 0
    model_calls: int = 0
    approvals: int = 0  # approval requests answered (the approvals attack)
    stuck: str = ""  # when hung: what the sessions were doing (``Scenario.stuck``)

    @property
    def ok(self) -> bool:
        return not (
            self.hung
            or self.orphans
            or self.lost
            or self.doubled
            or self.leaked_tasks
            or self.invalid
        )


class Scenario:
    """The models, manager and main session of one run."""

    def __init__(self, faults: Faults, workspace: Path, *, approvals: bool = False) -> None:
        self.faults = faults
        self.approvals = 0
        self.memory = self._memory()
        self.events: list[Event] = []
        self.main_task: asyncio.Task[Any] | None = None
        self.models = {name: self._model(name) for name in PLANS}
        roles = [
            Role("a", "the a role", "You are a.", None, "scripted:a", SPAWN),
            Role("b", "the b role", "You are b.", None, "scripted:b", SPAWN),
            Role("c", "the c role", "You are c.", None, "scripted:c", frozenset({"ask_parent"})),
        ]
        self.manager = SubAgentManager(
            RoleCatalog.of(*roles),
            ToolRegistry([guarded]),
            default_model=self.models["main"],
            model_for=lambda spec: self.models[spec.removeprefix("scripted:")],
            memory=self.memory,
            limits=FanOutLimits(0, 0, 0),  # races are the subject, not the caps (tested apart)
        )
        ctx = ToolContext(
            "main",
            workspace,
            workspace,
            role="main",
            call_chain=("main",),
            manager=self.manager,
            events=self.events.append,
            memory=self._tool_memory(),
            gate=self._policy(workspace) if approvals else None,
        )
        tools = ToolRegistry([*subagent_tools(), *self._main_tools()])
        config = RunConfig(self.models["main"], [], tools, ctx, max_iterations=20)
        lifecycle = Lifecycle(
            system_prompt=self._main_prompt,
            end_children=lambda: self.manager.cleanup("main"),
            children_per_turn=True,
        )
        self.main = Session("main", config, lifecycle)

    # -- what a variant of the scenario changes (benchmarks/team_fuzz.py) ----------------

    def _memory(self) -> FuzzMemory:
        """The manager's memory: where sessions render and consolidate."""
        return FuzzMemory(self.faults)

    def _tool_memory(self) -> Memory | None:
        """The memory the tools see (``ToolContext.memory``): none here."""
        return None

    def _main_tools(self) -> Sequence[Tool]:
        """Tools of the main agent besides the sub-agent ones."""
        return ()

    def _step(self, name: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        """What ``name``'s model answers to ``messages``: the next step of its plan."""
        return plan_step(PLANS[name], messages)

    def _policy(self, workspace: Path) -> Policy:
        """Every ``Guarded`` call, at any depth, waits for an answer that comes after a
        random moment: a yes or a no."""
        rules = RuleSet()
        rules.add("ask", ["Guarded"], workspace)
        return Policy(modes=("bypassPermissions",), rules=rules, approver=self._approve)

    async def _approve(self, request: ApprovalRequest) -> Approval:
        self.approvals += 1
        await asyncio.sleep(self.faults.rng.uniform(0, 0.01))
        return Approval(self.faults.rng.random() < 0.5, message="denied by the fuzz")

    async def _main_prompt(self) -> str:
        await asyncio.sleep(self.faults.delay())
        return "You are main."

    def _model(self, name: str) -> ScriptedModel:
        def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
            f = self.faults
            f.calls += 1
            model.delay = f.delay()  # the latency of the next call
            if f.calls == f.cancel_at and self.main_task is not None:
                self.main_task.cancel()
            if f.calls == f.interrupt_at:
                self._interrupt_one()
            if f.calls == f.fault_at:
                return ModelError(f"injected fault at model call {f.calls}")
            return self._step(name, messages, tools)

        model = ScriptedModel(name=f"scripted:{name}", responder=respond, record=False)
        return model

    def _interrupt_one(self) -> None:
        running = [s.id for s in self.manager.sessions() if s.state in ("running", "asking")]
        if running:
            self.manager.interrupt(self.faults.rng.choice(running))
        elif self.main.state == "running":
            self.main.interrupt()

    async def attack(self, moments: int, horizon: float, *, talk: bool = False) -> None:
        """``moments`` cancels or interrupts at random times within ``horizon`` seconds;
        with ``talk``, also steering of a working session and answers to a question from
        outside its parent (as a person over HTTP)."""
        rng = self.faults.rng
        for at in sorted(rng.uniform(0, horizon) for _ in range(moments)):
            await asyncio.sleep(max(0.0, at - asyncio.get_running_loop().time() + self._t0))
            pick = rng.random() * (4 if talk else 2)
            if pick < 1 and self.main_task is not None:
                self.main_task.cancel()
            elif pick < 2:
                self._interrupt_one()
            else:
                self._talk_to_one(steer=pick < 3)

    def _talk_to_one(self, *, steer: bool) -> None:
        state = "running" if steer else "asking"
        live = [s.id for s in self.manager.sessions() if s.state == state]
        if live:
            sid = self.faults.rng.choice(live)
            if steer:
                self.manager.steer_session(sid, "steered from outside")
            else:
                self.manager.answer(sid, "answered from outside")

    async def play(self, moments: int = 0, horizon: float = 0.0, *, talk: bool = False) -> Run:
        self._t0 = asyncio.get_running_loop().time()
        self.main_task = asyncio.create_task(self.main.send("go"), name="main run")
        attacker = None
        if moments:
            attacker = asyncio.create_task(self.attack(moments, horizon, talk=talk))
        done, _ = await asyncio.wait({self.main_task}, timeout=HANG_AFTER)
        if attacker is not None:
            attacker.cancel()
            await asyncio.wait({attacker})
        run = Run(hung=not done, model_calls=self.faults.calls, approvals=self.approvals)
        if not done:
            run.stuck = self.stuck()
        if done and not self.main_task.cancelled():
            self.main_task.exception()  # retrieved: a failed run is a normal outcome here
        await self.main.close()
        return self.check(run)

    def stuck(self) -> str:
        """What the sessions of a hung run are doing (before they are closed)."""
        states = [f"{s.id}: {s.state}" for s in [self.main, *self.manager.sessions()]]
        return "; ".join(states)

    def check(self, run: Run) -> Run:
        created = [
            e.agent_id for e in self.events if e.kind == SESSION and e.data["action"] == "created"
        ]
        counts = Counter(sid for sid, _ in self.memory.consolidated)
        opened = Counter(created)  # an id is used again after its session ended (re-opened)
        run.sessions = len(created)
        run.orphans = [s.id for s in self.manager.sessions()]
        run.lost = [sid for sid, n in opened.items() if counts[sid] < n]
        run.doubled = [sid for sid, n in counts.items() if n > max(opened[sid], 1)]
        me = asyncio.current_task()
        run.leaked_tasks = sum(1 for t in asyncio.all_tasks() if t is not me and not t.done())
        histories = [*self.memory.consolidated, ("main", self.main.messages)]
        run.invalid = [
            f"{sid}: {problems[0]}"
            for sid, messages in histories
            if (problems := _problems(messages))
        ]
        return run


def plan_step(plan: list[list[Any]], messages: Sequence[Message]) -> Any:
    """The step of ``plan`` that ``messages`` have come to: the turn is the number of user
    messages (the last turn's plan repeats), the step the number of assistant messages since
    the last user message."""
    turn = sum(isinstance(m, UserMessage) for m in messages) - 1
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    step = sum(isinstance(m, AssistantMessage) for m in messages[last_user:])
    steps = plan[min(turn, len(plan) - 1)]
    return steps[min(step, len(steps) - 1)]


def _problems(messages: list[Message]) -> list[str]:
    """A history is valid if it is empty, only a system prompt, or a valid conversation."""
    if all(isinstance(m, SystemMessage) for m in messages):
        return []
    return history_problems(messages)


def aim(faults: Faults, kind: str, k: int) -> tuple[int, float]:
    """Set ``faults`` for an attack of ``kind`` (at model call ``k``); the random moments
    of the run and the time within which they fall."""
    rng, moments, horizon = faults.rng, 0, 0.0
    if kind == "fault":
        faults.fault_at = k
    elif kind == "cancel":
        faults.cancel_at = k
    elif kind == "interrupt":
        faults.interrupt_at = k
    elif kind in ("random1", "random2"):
        moments, horizon = (1 if kind == "random1" else 2), rng.uniform(0.001, 0.08)
    elif kind in ("talk", "approvals"):
        moments, horizon = 3, rng.uniform(0.001, 0.08)
    return moments, horizon


async def one_run(seed: int, kind: str, k: int = 0, max_delay: float = 0.002) -> Run:
    faults = Faults(random.Random(seed), max_delay=max_delay)
    moments, horizon = aim(faults, kind, k)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Scenario(faults, Path(tmp), approvals=kind == "approvals")
        return await scenario.play(moments, horizon, talk=kind == "talk")


@dataclass
class Tally:
    runs: int = 0
    hangs: int = 0
    runs_with_orphans: int = 0
    orphans: int = 0
    lost_consolidations: int = 0
    double_consolidations: int = 0
    leaked_tasks: int = 0
    invalid_histories: int = 0
    sessions: int = 0
    model_calls: int = 0
    approvals: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, run: Run, label: str) -> None:
        self.runs += 1
        self.hangs += run.hung
        self.runs_with_orphans += bool(run.orphans)
        self.orphans += len(run.orphans)
        self.lost_consolidations += len(run.lost)
        self.double_consolidations += len(run.doubled)
        self.leaked_tasks += run.leaked_tasks
        self.invalid_histories += len(run.invalid)
        self.sessions += run.sessions
        self.model_calls += run.model_calls
        self.approvals += run.approvals
        if not run.ok and len(self.examples) < 5:
            self.examples.append(f"{label}: {run}")


RANDOM_KINDS = (
    ("random1", "one cancel/interrupt"),
    ("random2", "two cancel/interrupt"),
    ("talk", "three cancel/interrupt/steering/outside answer"),
    ("approvals", "random approvals and denials, three cancel/interrupt"),
)


async def campaign(
    random_runs: int,
    seed: int = 11,
    max_delay: float = 0.002,
    *,
    sweep_step: int = 1,
    play: Callable[..., Awaitable[Run]] = one_run,
    tally: Callable[[], Tally] = Tally,
    kinds: Sequence[tuple[str, str]] = RANDOM_KINDS,
) -> dict[str, Any]:
    """Every attack of the module docstring: a fault, cancel and interrupt at every
    ``sweep_step``-th model call k, and ``random_runs`` runs of each random kind. ``play``
    (``one_run``'s signature), ``tally`` and ``kinds`` are for variants of the scenario.

    The first tally is the undisturbed run, whose model calls give the range of k.
    """
    baseline = await play(seed, "none", max_delay=0)
    calls = baseline.model_calls
    tallies = {"undisturbed": tally()}
    tallies["undisturbed"].add(baseline, "undisturbed")
    step = f" step {sweep_step}" if sweep_step > 1 else ""
    for kind in ("fault", "cancel", "interrupt"):
        t = tallies[f"{kind} at model call k, k = 1..{calls}{step}"] = tally()
        for k in range(1, calls + 1, sweep_step):
            t.add(await play(seed + k, kind, k, max_delay), f"{kind}@{k}")
    for kind, label in kinds:
        t = tallies[f"{label} at a random moment"] = tally()
        for i in range(random_runs):
            t.add(await play(seed * 1000 + i, kind, max_delay=max_delay), f"{kind}#{i}")
    return tallies


def failures(t: Tally) -> int:
    return t.hangs + t.orphans + t.lost_consolidations + t.double_consolidations + t.leaked_tasks


def cli(
    argv: list[str] | None,
    *,
    description: str,
    seed: int,
    random_runs: int,
    quick_runs: int,
    fuzz: Callable[[int, int], Coroutine[Any, Any, dict[str, Any]]],
    results: Path,
    failed: Callable[[Any], int],
) -> int:
    """Run ``fuzz(random_runs, seed)`` from the command line, print its tallies and write
    them to ``results`` (not with ``--quick``); 1 if ``failed`` counts anything in one."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a few seconds, not the full run")
    parser.add_argument("--random-runs", type=int, default=random_runs)
    parser.add_argument("--seed", type=int, default=seed)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    tallies = asyncio.run(fuzz(quick_runs if args.quick else args.random_runs, args.seed))
    report = {
        "seed": args.seed,
        "runs": sum(t.runs for t in tallies.values()),
        "seconds": round(time.perf_counter() - started, 1),
        "python": sys.version.split()[0],
        "failures": sum(failed(t) for t in tallies.values()),
        "attacks": {name: asdict(t) for name, t in tallies.items()},
    }
    if not args.quick:
        results.parent.mkdir(exist_ok=True)
        results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 1 if report["failures"] else 0


def main(argv: list[str] | None = None) -> int:
    return cli(argv, description="Lifecycle fuzzing of nested sessions", seed=11,
               random_runs=1000, quick_runs=20, fuzz=campaign, results=RESULTS,
               failed=failures)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
