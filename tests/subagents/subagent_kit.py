"""Building blocks for sub-agent tests: roles backed by scripted models, a manager, a parent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retinue.engine import RunConfig, run
from retinue.llm.base import Model
from retinue.messages import Message, SystemMessage, UserMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ScriptedModel
from retinue.tools import Tool, ToolContext, ToolRegistry, tool


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
    """A Memory that remembers what it was asked to consolidate (no store behind it).

    ``render_delay`` and ``consolidate_delay`` make its calls await like a real store's;
    ``fail`` makes consolidation report that nothing could be written. ``started`` lists the
    consolidations begun, ``consolidated`` those that finished.
    """

    consolidated: list[tuple[str, str, list[Message]]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    render_delay: float = 0.0
    consolidate_delay: float = 0.0
    fail: bool = False

    async def render(self, tenant: str, role: str) -> str:
        if self.render_delay:
            await asyncio.sleep(self.render_delay)
        return f"## Memory of {role}\n(nothing yet)"

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
    ) -> bool:
        self.started.append(session_id)
        if self.consolidate_delay:
            await asyncio.sleep(self.consolidate_delay)
        self.consolidated.append((role, session_id, list(messages)))
        return not self.fail

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
    extra_tools: Sequence[Tool] = (),
    model: Callable[..., ScriptedModel] = ScriptedModel,
) -> Kit:
    """A manager of sub-agents of ``roles``, each with its own ``model(name=...)``."""
    models: dict[str, ScriptedModel] = {}
    defs = []
    for spec in roles:
        name, caps = (spec, frozenset()) if isinstance(spec, str) else spec
        models[f"scripted:{name}"] = model(name=f"scripted:{name}")
        defs.append(
            Role(name, f"the {name} role", f"You are {name}.", tools, f"scripted:{name}", caps)
        )
    memory = RecordingMemory()
    manager = SubAgentManager(
        RoleCatalog.of(*defs),
        ToolRegistry([echo, shout, *extra_tools]),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=models.__getitem__,
        memory=memory,
        max_depth=max_depth,
    )
    return Kit(
        manager, {k.removeprefix("scripted:"): v for k, v in models.items()}, memory, tmp_path
    )
