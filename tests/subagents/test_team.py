"""Teams (issue 31, items 3 and 5): ``TeamCreate`` starts teammates as background sessions of
the lead that know each other's names and the shared task list; ``SendMessage`` reaches them
by name (``team-lead``, ``*``); a shutdown request ends one teammate after a last turn and
consolidates it once; the lead's end (or ``TeamDelete``) ends them all; roles that name the
team tools get them."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from subagent_kit import Kit, make_kit
from test_messaging import Recorder, entered, gate, gates, results

from retinue.config import Settings
from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.errors import SubAgentError
from retinue.memory import open_memory
from retinue.messages import UserMessage
from retinue.runtime import Runtime, load_roles
from retinue.subagents import subagent_tools
from retinue.subagents.factory import AgentFactory
from retinue.subagents.tasklist import task_tools
from retinue.subagents.team import TeamMember, team_tools, teams_of
from retinue.subagents.tools import send_message
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

CORPUS = Path("/work/shared/claude-agents-corpus")
TEAM_TOOLS = {"SendMessage", "TaskCreate", "TaskList", "TaskGet", "TaskUpdate", "TeamCreate",
              "TeamDelete"}  # fmt: skip


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    gates.clear()
    entered.clear()
    return make_kit(tmp_path, "worker", "tester", "reviewer", extra_tools=[gate])


def members(*spec: tuple[str, str, str]) -> list[dict[str, str]]:
    return [{"name": n, "role": r, "task": t} for n, r, t in spec]


def create(name: str, *spec: tuple[str, str, str]):
    return call_tool("TeamCreate", {"team_name": name, "members": members(*spec)})


def send(to: str, message: str | dict[str, Any], wait: bool = False):
    return call_tool("SendMessage", {"to": to, "message": message, "wait": wait})


def lead(kit: Kit, model: ScriptedModel, ctx: ToolContext | None = None) -> Session:
    """The main agent as a session, with the delegation, message, task and team tools."""
    tools = ToolRegistry([*subagent_tools(), send_message, *task_tools(), *team_tools(), gate])
    return Session("main", RunConfig(model, [], tools, ctx or kit.ctx()))


def session(kit: Kit, sid: str) -> Session:
    held = kit.manager.registry.by_id(sid)
    assert held is not None, sid
    return held.session


THREE = (
    ("alice", "worker", "build the parser"),
    ("bob", "tester", "test the parser"),
    ("carol", "reviewer", "review both"),
)
IDS = ["main/worker:alice", "main/tester:bob", "main/reviewer:carol"]


async def opened(name: str) -> None:
    """Wait until a session waits at gate ``name``, then let it through."""
    await entered.setdefault(name, asyncio.Event()).wait()
    gates.setdefault(name, asyncio.Event()).set()


async def test_a_team_of_three_starts_in_the_background_and_knows_its_names(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    spec = (THREE[0], ("bob", "worker", "build the printer"), THREE[2])  # two of one role
    described = {"team_name": " parsers ", "members": members(*spec), "description": "a CLI"}
    model.add(call_tool("TeamCreate", described), "the team works")
    kit.models["worker"].add("parser done", "printer done")
    kit.models["reviewer"].add("reviewed")
    main = lead(kit, model)
    out = await main.send("split the work")
    (started,) = results(out.messages)
    ids = ["main/worker:alice", "main/worker:bob", "main/reviewer:carol"]
    assert "team 'parsers' (lead main)" in started and "SubAgentStatus" in started
    assert all(sid in started for sid in ids)
    sessions = [session(kit, sid) for sid in ids]
    for s in sessions:
        await s.wait_background()
    firsts = {s.id: next(m.content for m in s.messages if isinstance(m, UserMessage))
              for s in sessions}  # fmt: skip
    alice = firsts["main/worker:alice"]
    assert alice.startswith(
        "[You are alice, a teammate (worker) in team 'parsers', led by main. The team is for: "
        "a CLI. Your teammates:"
    )
    assert "Your teammates: bob (worker), carol (reviewer)." in alice
    assert alice.endswith("Your task: build the parser")
    assert "TaskUpdate" not in alice  # this memory keeps no task list: none is offered
    assert "Your teammates: alice (worker), bob (worker)." in firsts["main/reviewer:carol"]
    polled = await kit.manager.poll(kit.ctx(), "reviewer", "carol")
    assert "New replies" in polled and "reviewed" in polled  # the lead collects as usual
    assert all(s.config.interactive for s in sessions)  # sessions of the lead, by every rule
    await kit.manager.cleanup("main")
    assert sorted(kit.memory.sessions()) == sorted(ids)  # each consolidated once
    assert teams_of(kit.manager.registry).led_by("default", "main") is None
    await main.close()


async def test_teammates_message_each_other_and_the_lead_by_name(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    lead_sees = Recorder("noted")
    model.add(create("t", THREE[0], THREE[2]), "ok", lead_sees)
    carol_sees = Recorder("carol got it")
    kit.models["worker"].add(
        call_tool("Gate", {"name": "a"}),
        send("carol", "the parser is ready"),
        send("team-lead", "parser ready"),
        "sent",
    )
    kit.models["reviewer"].add("waiting", carol_sees)
    main = lead(kit, model)
    await main.send("go")
    alice, carol = session(kit, IDS[0]), session(kit, IDS[2])
    await carol.wait_background()  # idle, as the lead is
    await opened("a")
    await alice.wait_background()
    _, to_carol, to_lead = results(alice.messages)
    assert "message delivered to main/reviewer:carol: it was idle" in to_carol
    assert "message delivered to main: it was idle" in to_lead
    await carol.wait_background()
    await main.wait_background()
    assert "[message from main/worker:alice: the parser is ready]" in carol_sees.seen
    assert "[message from main/worker:alice: parser ready]" in lead_sees.seen
    assert carol.collect()[-1] == "carol got it" and main.collect() == ["noted"]
    await kit.manager.cleanup("main")
    await main.close()


async def test_a_broadcast_reaches_every_other_teammate_and_the_lead(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    model.add(create("t", *THREE), "ok", "lead saw it")
    seen = {n: Recorder(f"{n} saw it") for n in ("bob", "carol")}
    kit.models["worker"].add(call_tool("Gate", {"name": "a"}), send("*", "stop: bug"), "sent")
    kit.models["tester"].add("bob idle", seen["bob"])
    kit.models["reviewer"].add("carol idle", seen["carol"])
    main = lead(kit, model)
    await main.send("go")
    alice, bob, carol = (session(kit, sid) for sid in IDS)
    await bob.wait_background()
    await carol.wait_background()
    await opened("a")
    await alice.wait_background()
    _, broadcast = results(alice.messages)
    assert broadcast.count("message delivered") == 3  # bob, carol and the lead
    for s in (bob, carol, main):
        await s.wait_background()
    for r in seen.values():
        assert "[message from main/worker:alice: stop: bug]" in r.seen
    assert main.collect() == ["lead saw it"]
    await kit.manager.cleanup("main")
    await main.close()


async def test_a_shutdown_request_ends_the_teammate_after_a_last_turn_and_consolidates_once(
    kit: Kit,
) -> None:
    model = ScriptedModel(name="scripted:main")
    wrap = Recorder("released #1; parser half done")
    model.add(
        create("t", THREE[0], THREE[2]),
        call_tool("Gate", {"name": "m"}),
        send("alice", {"type": "shutdown_request", "reason": "plans changed"}, wait=True),
        send("alice", "are you there?"),
        "alice is gone",
    )
    kit.models["worker"].add("working", wrap)
    kit.models["reviewer"].add("reviewing")
    main = lead(kit, model)
    turn = asyncio.ensure_future(main.send("go"))
    await entered.setdefault("m", asyncio.Event()).wait()
    await session(kit, IDS[0]).wait_background()  # its first turn is over: it is idle
    await opened("m")
    out = await turn
    _, _, report, refused = results(out.messages)
    assert report.startswith("[alice (main/worker:alice) has shut down: 2 turn(s), memory ")
    assert report.endswith("Its last reply: released #1; parser half done")
    assert "[shutdown request from the lead: plans changed." in wrap.seen
    assert "no session 'alice'" in refused  # it has ended: no longer a name of the team
    assert kit.manager.registry.by_id(IDS[0]) is None
    assert kit.memory.sessions() == ["main/worker:alice"]
    await kit.manager.cleanup("main")
    assert sorted(kit.memory.sessions()) == ["main/reviewer:carol", "main/worker:alice"]
    await main.close()


async def test_a_shutdown_request_to_a_working_teammate_arrives_between_its_steps(
    kit: Kit,
) -> None:
    """Without wait, the lead goes on; the teammate sees the request before its next step,
    ends after that turn, and its report reaches the lead as a message."""
    model = ScriptedModel(name="scripted:main")
    after = Recorder("stopping as asked")
    reaches_lead = Recorder("noted")
    model.add(
        create("t", THREE[0]),
        call_tool("Gate", {"name": "m"}),
        send("alice", '{"type": "shutdown_request", "reason": "enough"}'),
        "asked it to stop",
        reaches_lead,
    )
    kit.models["worker"].add(call_tool("Gate", {"name": "a"}), after)
    main = lead(kit, model)
    turn = asyncio.ensure_future(main.send("go"))
    await entered.setdefault("a", asyncio.Event()).wait()  # alice is working
    await opened("m")
    out = await turn
    assert "its last reply will reach you as a message" in results(out.messages)[2]
    team = teams_of(kit.manager.registry).led_by("default", "main")
    assert team is not None
    alice = team.members["alice"]
    assert alice.ending is not None
    gates["a"].set()
    await alice.ending
    assert "[shutdown request from the lead: enough." in after.seen  # in the same turn
    assert alice.session.turns == 1 and alice.session.state == "closed"
    await main.wait_background()
    assert "has shut down: 1 turn(s), memory consolidated" in reaches_lead.seen
    assert "Its last reply: stopping as asked" in reaches_lead.seen
    assert kit.memory.sessions() == ["main/worker:alice"]
    await kit.manager.cleanup("main")
    assert kit.memory.sessions() == ["main/worker:alice"]  # not twice
    await main.close()


async def test_only_the_lead_asks_for_a_shutdown_and_it_cannot_be_declined(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    model.add(create("t", THREE[0], THREE[2]), "ok")
    kit.models["worker"].add(
        send("carol", {"type": "shutdown_request"}),
        send("team-lead", {"type": "shutdown_response", "approve": False}),
        send("carol", {"type": "plan_approval_response"}),
        send("*", "all of you?", wait=True),
        "tried",
    )
    kit.models["reviewer"].add("fine")
    main = lead(kit, model)
    await main.send("go")
    alice = session(kit, IDS[0])
    await alice.wait_background()
    by_sibling, response, plan, everyone = results(alice.messages)
    assert "wait=true needs one receiver, not '*'" in everyone
    assert "only a team's lead sends shutdown requests" in by_sibling
    assert "there is no shutdown request to answer" in response
    assert "plan approval is not part of Retinue's teams" in plan
    teams, mate = teams_of(kit.manager.registry), kit.ctx(IDS[0])
    with pytest.raises(SubAgentError, match="no nested teams"):
        teams.create(mate, kit.manager, "mine", [TeamMember(name="x", role="tester", task="t")])
    assert session(kit, IDS[2]).state != "closed"
    await kit.manager.cleanup("main")
    await main.close()


async def test_team_names_are_checked_and_a_lead_leads_one_team(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    model.add(
        create("t", ("alice", "worker", "a"), ("alice", "reviewer", "b")),
        create("t", ("team-lead", "worker", "a")),
        create("t", ("alice", "worker", "a"), ("zed", "nobody", "b")),
        create("other", ("bob", "tester", "b")),
        create("t", ("bob", "tester", "b")),
        "done",
    )
    kit.models["worker"].add("a")
    kit.models["tester"].add("b")
    main = lead(kit, model)
    out = await main.send("go")
    twice, reserved, partly, second, added = results(out.messages)
    assert "two teammates named 'alice'" in twice
    assert "invalid teammate name 'team-lead'" in reserved
    assert "started, working in the background: alice" in partly
    assert "not started: zed (nobody): unknown role 'nobody'" in partly
    assert "you lead team 't' already" in second
    assert "bob (tester, session main/tester:bob)" in added
    team = teams_of(kit.manager.registry).led_by("default", "main")
    assert team is not None and sorted(team.members) == ["alice", "bob"]
    await kit.manager.cleanup("main")
    await main.close()


async def test_team_delete_ends_every_teammate_at_once(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    model.add(
        create("t", *THREE),
        call_tool("Gate", {"name": "m"}),
        call_tool("TeamDelete", {}),
        call_tool("TeamDelete", {}),
        "x",
    )
    kit.models["worker"].add(call_tool("Gate", {"name": "never"}), "b")
    kit.models["tester"].add("b")
    kit.models["reviewer"].add("c")
    main = lead(kit, model)
    turn = asyncio.ensure_future(main.send("go"))
    await entered.setdefault("never", asyncio.Event()).wait()
    for sid in IDS[1:]:
        await session(kit, sid).wait_background()
    await opened("m")
    out = await turn
    _, _, deleted, again = results(out.messages)
    assert deleted.startswith("team 't' deleted; its teammates ended:\n- alice: 0 turn(s)")
    assert "- carol: 1 turn(s), memory consolidated" in deleted
    assert "you lead no team" in again
    assert sorted(kit.memory.sessions()) == sorted(IDS)
    assert kit.manager.registry.held_by("main") == []
    await kit.manager.cleanup("main")
    assert sorted(kit.memory.sessions()) == sorted(IDS)  # once each
    await main.close()


async def test_dependencies_block_a_claim_and_tasks_are_given_by_name_and_ending_releases(
    kit: Kit, tmp_path: Path
) -> None:
    store = open_memory(tmp_path / "mem")
    kit.memory.tasks = store.tasks  # type: ignore[attr-defined]  (a store that keeps tasks)
    ctx = replace(kit.ctx(), memory=store)
    model = ScriptedModel(name="scripted:main")
    model.add(
        call_tool("TaskCreate", {"subject": "parser"}),
        call_tool("TaskCreate", {"subject": "printer", "blocked_by": [1]}),
        create("t", ("alice", "worker", "do your task"), ("carol", "reviewer", "wait")),
        call_tool("TaskUpdate", {"id": 1, "owner": "alice"}),
        "planned",
    )
    kit.models["worker"].add(
        call_tool("Gate", {"name": "a"}),
        call_tool("TaskUpdate", {"id": 1, "status": "completed"}),
        "parser done",
    )
    kit.models["reviewer"].add(
        call_tool("Gate", {"name": "c"}),
        call_tool("TaskUpdate", {"id": 2, "status": "in_progress"}),
        call_tool("TaskUpdate", {"id": 1, "status": "in_progress"}),
        "blocked",
        call_tool("TaskUpdate", {"id": 2, "owner": "carol", "status": "in_progress"}),
        "printer taken",
    )
    main = lead(kit, model, ctx)
    out = await main.send("plan")
    (_, _, _, given) = results(out.messages)
    assert given == "updated #1 [pending] parser (owner: main/worker:alice)"  # by its name
    carol, alice = session(kit, IDS[2]), session(kit, IDS[0])
    await opened("c")
    first = next(m.content for m in carol.messages if isinstance(m, UserMessage))
    assert "claim a task with TaskUpdate(id, status='in_progress')" in first
    await carol.wait_background()
    _, blocked, owned = results(carol.messages)
    assert "task #2 is blocked by #1 (pending)" in blocked
    assert "task #1 is owned by main/worker:alice" in owned
    await opened("a")
    await alice.wait_background()
    assert results(alice.messages)[-1] == "updated #1 [completed] parser (owner: main/worker:alice)"
    out = await kit.manager.interactive_subagent(ctx, "try again", "reviewer", "carol")
    taken = results(out.messages)[-1]
    assert taken.startswith("updated #2 [in_progress] printer (owner: main/reviewer:carol")
    await kit.manager.cleanup("main")
    # carol ended with #2 started: it is back on the list for another; alice's done #1 stays
    done, printer = await store.tasks.list("default", "main")
    assert (done.status, done.owner) == ("completed", "main/worker:alice")
    assert (printer.status, printer.owner) == ("pending", None)
    await main.close()
    store.close()


# -- item 5: roles that name the team tools ------------------------------------------------


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
def test_a_real_team_lead_role_file_loads_with_its_team_tools(tmp_path: Path) -> None:
    """A copy of wshobson's team-lead.md (tools: ..., Agent, TeamCreate, TeamDelete,
    TaskCreate, TaskList, TaskGet, TaskUpdate, SendMessage) loads without a left-out tool,
    and its sessions get each of them."""
    workspace = tmp_path / "ws"
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    shutil.copy(CORPUS / "wshobson__agents" / "team-lead.md", agents / "team-lead.md")
    settings = Settings.load(home=tmp_path / "home", workspace=workspace)
    catalog = load_roles(settings)
    role = catalog.roles["team-lead"]
    mine = [p.reason for p in catalog.problems if p.path.name == "team-lead.md"]
    assert not any(name in r for r in mine for name in TEAM_TOOLS), mine
    store = open_memory(tmp_path / "mem")
    factory = AgentFactory(catalog, ToolRegistry([]), default_model=ScriptedModel(), memory=store)
    assert set(factory.tools_for(role).names) >= TEAM_TOOLS  # one-shot, by naming them
    store.close()


async def test_the_main_agent_of_a_runtime_leads_a_team_that_ends_with_its_turn(
    tmp_path: Path,
) -> None:
    """Wired for real: a Runtime's main agent has TeamCreate; role files give the roles; the
    teammates' replies are collected with SubAgentStatus; the turn's end closes them."""
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "worker.md").write_text(
        "---\nname: worker\ndescription: Works.\ntools: [Read]\nmodel: scripted:w\n---\nWork.\n"
    )
    status = {"role": "worker", "wait": True}
    main = ScriptedModel(
        [
            create("duo", ("alice", "worker", "part one"), ("bob", "worker", "part two")),
            call_tool("SubAgentStatus", {**status, "instance": "alice"}),
            call_tool("SubAgentStatus", {**status, "instance": "bob"}),
            "both parts are done",
        ]
    )
    worker = ScriptedModel(["one part done", "another part done"], name="scripted:w")
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=main, model_for=lambda _: worker, with_memory=False)
    conversation = runtime.conversation()
    out = await conversation.send("do it as a team")
    assert out.content == "both parts are done"
    _, alice, bob = results(out.messages)
    assert "Session main/worker:alice: idle, 1 turn(s) done. New replies" in alice
    assert "Session main/worker:bob: idle, 1 turn(s) done. New replies" in bob
    assert runtime.manager.registry.held_by() == []  # ended with the main agent's turn
    assert teams_of(runtime.manager.registry).led_by("default", "main") is None
    await conversation.close()
