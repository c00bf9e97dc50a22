"""Tools: declaration from typed Python functions, the call context, and the registry.

A tool is an async (or plain) function whose first parameter is a :class:`ToolContext` and
whose other parameters are typed; pydantic builds the JSON schema the model sees and
validates the arguments the model sends. Anything that goes wrong inside a call becomes an
error *result* the model reads (``is_error=True``): a bad tool call never crashes a run.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, get_type_hints

import pydantic

from retinue.errors import RetinueError, ToolError
from retinue.events import TOOL_FINISHED, TOOL_STARTED, EventSink, emit
from retinue.llm.base import ToolSpec
from retinue.messages import ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from retinue.memory.base import Memory

__all__ = ["Delegator", "Tool", "ToolContext", "ToolRegistry", "tool"]


class Delegator(Protocol):
    """What the ``SubAgent`` / ``UnloadSubAgent`` / ``SubAgentStatus`` / ``FindRole`` tools
    need from the sub-agent manager."""

    async def delegate(
        self,
        ctx: ToolContext,
        *,
        task: str,
        role: str,
        interactive: bool = False,
        instance: str | None = None,
        background: bool = False,
    ) -> str: ...

    async def unload(self, ctx: ToolContext, role: str, instance: str | None = None) -> str: ...

    async def poll(
        self, ctx: ToolContext, role: str, instance: str | None = None, *, wait: bool = False
    ) -> str: ...

    def find_roles(self, ctx: ToolContext, query: str) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling a tool, and with what.

    ``call_chain`` is the list of roles from the main agent down to this one (used to refuse
    cycles); ``depth`` is its nesting level (main agent = 0). Cancellation is asyncio's: a
    cancelled run cancels the tool's task at its next ``await``.
    """

    agent_id: str
    workspace: Path
    data_dir: Path
    role: str = "main"
    parent_id: str | None = None
    tenant: str = "default"
    depth: int = 0
    call_chain: tuple[str, ...] = ()
    manager: Delegator | None = None
    memory: Memory | None = None
    events: EventSink | None = None

    def child(self, *, agent_id: str, role: str) -> ToolContext:
        """The context of a sub-agent this agent spawns."""
        return replace(
            self,
            agent_id=agent_id,
            role=role,
            parent_id=self.agent_id,
            depth=self.depth + 1,
            call_chain=(*self.call_chain, role),
        )


ToolFunction = Callable[..., Awaitable[str] | str]


@dataclass(slots=True)
class Tool:
    """One tool: a name, a description, a pydantic model of its parameters, and a function."""

    name: str
    description: str
    params: type[pydantic.BaseModel]
    fn: ToolFunction
    _spec: ToolSpec | None = field(default=None, repr=False)

    @property
    def spec(self) -> ToolSpec:
        if self._spec is None:
            schema = self.params.model_json_schema()
            schema.pop("title", None)
            self._spec = ToolSpec(self.name, self.description, schema)
        return self._spec

    async def invoke(self, ctx: ToolContext, arguments: str) -> str:
        """Validate the model's raw JSON arguments and run the tool; raise ``ToolError``."""
        try:
            raw = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from None
        if not isinstance(raw, dict):
            raise ToolError("arguments must be a JSON object")
        try:
            args = self.params.model_validate(raw)
        except pydantic.ValidationError as exc:
            raise ToolError(f"invalid arguments: {_summarise(exc)}") from None
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        result = self.fn(ctx, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return str(result)


def _summarise(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def tool(name: str | None = None, description: str | None = None) -> Callable[[ToolFunction], Tool]:
    """Declare a tool from a typed function ``fn(ctx, **params)``.

    The parameter schema comes from the signature (use ``Annotated[T, Field(description=...)]``
    to describe a parameter); the description defaults to the docstring.
    """

    def wrap(fn: ToolFunction) -> Tool:
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for i, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
            if i == 0:
                continue  # the ToolContext
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (hints.get(pname, Any), default)
        model = pydantic.create_model(  # type: ignore[call-overload]
            f"{fn.__name__}_params", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        doc = inspect.cleandoc(fn.__doc__ or "")
        return Tool(name or fn.__name__, description or doc, model, fn)

    return wrap


class ToolRegistry:
    """Tools by name. ``restricted`` makes the view a role may use (its allow-list)."""

    def __init__(self, tools: Iterable[Tool] = (), *, withheld: Iterable[str] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._withheld = frozenset(withheld)
        for t in tools:
            self.register(t)

    def register(self, t: Tool) -> Tool:
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def restricted(self, allowed: Iterable[str] | None) -> ToolRegistry:
        """Only the tools named in ``allowed`` (``None`` keeps all); the rest are refused."""
        if allowed is None:
            return ToolRegistry(self._tools.values(), withheld=self._withheld)
        keep = set(allowed)
        return ToolRegistry(
            (t for n, t in self._tools.items() if n in keep),
            withheld=self._withheld | (self._tools.keys() - keep),
        )

    def without(self, names: Iterable[str]) -> ToolRegistry:
        drop = set(names)
        return ToolRegistry(
            (t for n, t in self._tools.items() if n not in drop),
            withheld=self._withheld | (drop & self._tools.keys()),
        )

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResultMessage:
        """Run one call; every failure becomes an error result, never an exception.

        Cancellation (``asyncio.CancelledError``) is the one thing that propagates.
        """
        emit(
            ctx.events,
            TOOL_STARTED,
            ctx.agent_id,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
        )
        try:
            content, is_error = await self._run(call, ctx), False
        except RetinueError as exc:  # ToolError and every other error Retinue explains itself
            content, is_error = f"Error: {exc}", True
        except Exception as exc:
            content, is_error = f"Error: {call.name} failed: {type(exc).__name__}: {exc}", True
        emit(
            ctx.events,
            TOOL_FINISHED,
            ctx.agent_id,
            call_id=call.id,
            name=call.name,
            is_error=is_error,
            preview=content[:200],
        )
        return ToolResultMessage(call.id, call.name, content, is_error)

    async def _run(self, call: ToolCall, ctx: ToolContext) -> str:
        t = self._tools.get(call.name)
        if t is None:
            if call.name in self._withheld:
                raise ToolError(f"tool {call.name!r} is not allowed for this agent")
            raise ToolError(
                f"unknown tool {call.name!r}; available tools: {', '.join(self._tools) or 'none'}"
            )
        return await t.invoke(ctx, call.arguments)


def merge(*registries: ToolRegistry | Sequence[Tool]) -> ToolRegistry:
    """One registry holding the tools of several (later names win)."""
    out = ToolRegistry()
    for reg in registries:
        for t in reg._tools.values() if isinstance(reg, ToolRegistry) else reg:
            out.register(t)
    return out
