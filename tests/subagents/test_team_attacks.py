"""Teams under random attacks (issue 31, "Done when": the lifecycle checks with random
messages and task claims). The black-box scenario (a lead, three teammates, six dependent
tasks, each teammate claiming and completing by one rule) runs with fixed seeds while, at
random model calls, the lead messages a teammate or everyone, asks one to shut down (waiting
or not), unloads one, interrupts one's turn, deletes the team, or ends (cleanup), two or three
of these per run. After every run: nothing hung, no session is left, every teammate was
consolidated exactly once, no task was completed twice, every history is valid, and no
asyncio task is left running."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from subagent_kit import Kit, make_kit
from test_team_blackbox import NAMES, TASKS, teammate, the_lead

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.errors import RetinueError
from retinue.llm.base import ToolSpec
from retinue.memory import open_memory
from retinue.messages import Message, ToolResultMessage, history_problems
from retinue.subagents import subagent_tools
from retinue.subagents.tasklist import task_tools
from retinue.subagents.team import deliver, team_tools, teams_of
from retinue.subagents.tools import send_message
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry

pytestmark = pytest.mark.timeout(120)

ATTACKS = ("message", "broadcast", "shutdown", "shutdown-wait", "unload", "interrupt", "delete",
           "end")  # fmt: skip
HANG_AFTER = 20.0  # seconds: a run taking longer counts as hung (not a timing assertion)


async def _attack(kind: str, rng: random.Random, kit: Kit, lead: ToolContext) -> str:
    """Do ``kind``; say whether it was done or refused."""
    registry, name = kit.manager.registry, rng.choice(NAMES)
    try:
        if kind in ("message", "broadcast"):
            to = name if kind == "message" else "*"
            await deliver(lead, registry, to, "hurry up", wait=False)
        elif kind.startswith("shutdown"):
            request = {"type": "shutdown_request", "reason": "fuzz"}
            await deliver(lead, registry, name, request, wait=kind == "shutdown-wait")
        elif kind == "unload":
            await kit.manager.unload_subagent("main", "worker", name)
        elif kind == "interrupt":
            kit.manager.interrupt(f"main/worker:{name}")
        elif kind == "delete":
            await teams_of(registry).delete(lead)
        else:
            await kit.manager.cleanup("main")  # the lead's run ends
    except RetinueError:
        return f"{kind} refused"  # (it ended already, nobody is left...): a valid outcome
    return kind


async def _quiet(kit: Kit, main: Session, attacks: list[asyncio.Task[str]]) -> None:
    """Until the attacks are over and every session of the tree is idle (then nothing can
    start again)."""
    while True:
        if attacks:
            await asyncio.wait(list(attacks))
        sessions = [h.session for h in kit.manager.registry.held_by("main")]
        for s in (*sessions, main):
            await s.wait_background()
        if all(t.done() for t in attacks) and all(
            s.state in ("idle", "closed") and not s.tasks() for s in (*sessions, main)
        ):
            return


async def one_run(seed: int, tmp: Path, done: Counter[str]) -> list[str]:
    """One attacked run; what went wrong (empty: nothing). ``done`` counts the attacks made
    and the runs whose six tasks were all completed."""
    rng = random.Random(seed)
    kit = make_kit(tmp, "worker")
    store = open_memory(tmp / "mem")
    kit.memory.tasks = store.tasks  # type: ignore[attr-defined]
    kit.memory.consolidate_delay = 0.0005  # a consolidation awaits, like a store's
    moments = set(rng.sample(range(2, 40), rng.randint(2, 3)))
    attacks: list[asyncio.Task[str]] = []
    lead_ctx = replace(kit.ctx(), memory=store)
    calls = 0

    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
        nonlocal calls
        calls += 1
        if calls in moments:
            kind = rng.choice(ATTACKS)
            attacks.append(
                asyncio.get_running_loop().create_task(_attack(kind, rng, kit, lead_ctx))
            )
        return teammate(messages, tools)

    kit.models["worker"].add(*[step] * 2_000)
    kit.models["worker"].delay = 0.0005
    tools = ToolRegistry([*subagent_tools(), send_message, *task_tools(), *team_tools()])
    main = Session("main", RunConfig(ScriptedModel(responder=the_lead), [], tools, lead_ctx))
    problems: list[str] = []
    try:
        await asyncio.wait_for(main.send("build it with a team"), HANG_AFTER)
        await asyncio.wait_for(_quiet(kit, main, attacks), HANG_AFTER)
    except TimeoutError:
        problems.append("hung")
    await kit.manager.cleanup("main")
    await main.close()
    for t in attacks:
        t.cancel()
    if kit.manager.registry.held_by():
        problems.append(f"orphans: {[h.id for h in kit.manager.registry.held_by()]}")
    started = Counter(kit.memory.started)
    for sid in (f"main/worker:{n}" for n in NAMES):
        if started[sid] != 1:
            problems.append(f"{sid} consolidated {started[sid]} times")
    completions = Counter(
        int(n)
        for _, _, messages in kit.memory.consolidated
        for m in messages
        if isinstance(m, ToolResultMessage)
        for n in re.findall(r"^updated #(\d+) \[completed\]", m.content)
    )
    problems += [f"task #{n} completed {c} times" for n, c in completions.items() if c > 1]
    for sid, messages in [(s, m) for _, s, m in kit.memory.consolidated] + [
        ("main", main.messages)
    ]:
        problems += [f"{sid}: {p}" for p in history_problems(messages)]
    me = asyncio.current_task()
    await asyncio.sleep(0)  # (the cancelled attacks finish)
    left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    problems += [f"task left running: {t.get_name()}" for t in left]
    tasks = await store.tasks.list("default", "main")
    if len(tasks) != len(TASKS):
        problems.append(f"{len(tasks)} tasks stored, not {len(TASKS)}")
    done.update(t.result() for t in attacks if t.done() and not t.cancelled())
    done["all tasks completed"] += all(t.status == "completed" for t in tasks)
    store.close()
    return [f"seed {seed}: {p}" for p in problems]


async def test_teams_under_random_attacks_leave_nothing_behind(tmp_path: Path) -> None:
    problems: list[str] = []
    done: Counter[str] = Counter()
    for seed in range(24):
        problems += await one_run(seed, tmp_path / str(seed), done)
    assert problems == []
    # the attacks bite: most kinds were made, and some runs were cut short, others finished
    tried = {kind.removesuffix(" refused") for kind in done} & set(ATTACKS)
    assert len(tried) >= 6, done
    assert 0 < done["all tasks completed"] < 24, done
