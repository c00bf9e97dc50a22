"""Building blocks for sub-agent tests: roles backed by scripted models, a manager, a parent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retinue.engine import RunConfig, run
from retinue.llm.base import Model
from retinue.messages import Message, SystemMessage, UserMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry, tool


@tool("Echo")
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


@tool("Shout")
def shout(ctx: ToolContext, text: str) -> str:
    """Shout the text back."""
    return text.upper()


@dataclass
class RecordingMemory:
    """A Memory that remembers what it was asked to consolidate (no store behind it)."""

    consolidated: list[tuple[str, str, list[Message]]] = field(default_factory=list)

    async def render(self, tenant: str, role: str) -> str:
        return f"## Memory of {role}\n(nothing yet)"

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
    ) -> None:
        self.consolidated.append((role, session_id, list(messages)))

    def sessions(self) -> list[str]:
        return [sid for _, sid, _ in self.consolidated]


@dataclass
class Kit:
    manager: SubAgentManager
    models: dict[str, ScriptedModel]
    memory: RecordingMemory
    workspace: Path

    def ctx(self, agent_id: str = "main") -> ToolContext:
        return ToolContext(
            agent_id,
            self.workspace,
            self.workspace,
            role="main",
            call_chain=("main",),
            manager=self.manager,
        )

    async def run_main(self, model: ScriptedModel, task: str, agent_id: str = "main"):
        """Run a main agent (which may delegate) and clean up its sessions afterwards."""
        tools = ToolRegistry([echo, *subagent_tools()])
        config = RunConfig(
            model, [SystemMessage("main"), UserMessage(task)], tools, self.ctx(agent_id)
        )
        async with self.manager.owner(agent_id):
            return await run(config)


def make_kit(
    tmp_path: Path,
    *roles: tuple[str, frozenset[str]] | str,
    max_depth: int = 3,
    tools: tuple[str, ...] | None = None,
) -> Kit:
    models: dict[str, ScriptedModel] = {}
    defs = []
    for spec in roles:
        name, caps = (spec, frozenset()) if isinstance(spec, str) else spec
        models[f"scripted:{name}"] = ScriptedModel(name=f"scripted:{name}")
        defs.append(
            Role(name, f"the {name} role", f"You are {name}.", tools, f"scripted:{name}", caps)
        )
    memory = RecordingMemory()
    manager = SubAgentManager(
        RoleCatalog.of(*defs),
        ToolRegistry([echo, shout]),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=models.__getitem__,
        memory=memory,
        max_depth=max_depth,
    )
    return Kit(
        manager, {k.removeprefix("scripted:"): v for k, v in models.items()}, memory, tmp_path
    )
