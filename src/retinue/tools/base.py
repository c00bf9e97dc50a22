"""Tools: declaration from typed Python functions, the call context, and the registry.

A tool is an async (or plain) function with typed parameters; a parameter annotated
:class:`ToolContext` (any position, or none at all) receives the call's context. pydantic
builds the JSON schema the model sees and validates the arguments the model sends. Anything
that goes wrong inside a call becomes an error *result* the model reads (``is_error=True``):
a bad tool call never crashes a run.

A plain ``def`` tool runs in a bounded thread pool (``_threads.run_sync``), so one that blocks
stalls only its own call, not every session of the process; ``async def`` tools run inline.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Protocol,
    TypeAlias,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from typing_extensions import TypeVar

from retinue.errors import RetinueError, ToolError
from retinue.events import TOOL_FINISHED, TOOL_STARTED, EventSink, emit
from retinue.llm.base import ToolSpec
from retinue.messages import (
    Content,
    DocumentPart,
    ImagePart,
    MediaPart,
    Message,
    ToolCall,
    ToolResultMessage,
    is_media,
    media_part,
    user_content,
)
from retinue.tools._threads import Pace, run_sync

if TYPE_CHECKING:
    import pydantic

    from retinue.memory.base import Memory
    from retinue.memory.store import SharedBlock

__all__ = [
    "ApprovalCheck",
    "CallGate",
    "Delegator",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "tool",
    "tool_output",
]


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
        fork: bool = False,
        parts: tuple[MediaPart, ...] = (),
    ) -> str:
        """Run ``task`` on a session of ``role``; ``parts`` (images, PDFs the parent hands
        over, ``SubAgent(files=...)``) follow the task's text in the sub-agent's message."""
        ...

    async def unload(self, ctx: ToolContext, role: str, instance: str | None = None) -> str: ...

    async def poll(
        self, ctx: ToolContext, role: str, instance: str | None = None, *, wait: bool = False
    ) -> str: ...

    def find_roles(self, ctx: ToolContext, query: str) -> str: ...


class CallGate(Protocol):
    """What decides whether a call runs (:class:`retinue.policy.gate.Policy`): the run loop
    hands every call to it instead of running it directly, and, where it is ``guarded``,
    each model call and each answer too (the program's guards, :mod:`retinue.policy.guards`).
    """

    def execute(
        self, registry: ToolRegistry, call: ToolCall, ctx: ToolContext
    ) -> Coroutine[Any, Any, ToolResultMessage]:
        """The call's run, to await (an ``async def`` is one; a plain ``def`` may hand back
        the registry's own coroutine)."""
        ...

    @property
    def guarded(self) -> bool:
        """Whether :meth:`screen_model_call` and :meth:`screen_answer` may do anything."""
        ...

    async def screen_model_call(
        self, messages: list[Message], model: str, ctx: ToolContext
    ) -> tuple[list[Message], str]:
        """The messages to send (``messages``, or a guard's rewrite) and why the call may not
        be made (``""``: it may)."""
        ...

    async def screen_answer(self, content: str, output: Any, ctx: ToolContext) -> tuple[str, str]:
        """The answer to give back (``content``, or a guard's rewrite) and why it is withheld
        (``""``: it is not)."""
        ...


DepsT = TypeVar("DepsT", default=Any)


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """Who is calling a tool, and with what.

    ``call_chain`` is the list of roles from the main agent down to this one (used to refuse
    cycles); ``depth`` is its nesting level (main agent = 0). Cancellation is asyncio's: a
    cancelled run cancels the tool's task at its next ``await``.

    ``deps`` is the run's own context (``agent.run(..., deps=x)``), the same object for every
    tool at every depth (:meth:`child` keeps it); a tool declares its type as
    ``ctx: ToolContext[MyDeps]``. It lives only in memory: it is never recorded (journals,
    stores, traces) nor shown to a model.
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
    gate: CallGate | None = None  # None: every call runs (no policy configured)
    shared_memory: tuple[SharedBlock, ...] = ()  # the shared blocks its role declares
    deps: DepsT = field(default=cast(Any, None), repr=False, compare=False)

    def child(self, *, agent_id: str, role: str) -> ToolContext[DepsT]:
        """The context of a sub-agent this agent spawns."""
        return replace(
            self,
            agent_id=agent_id,
            role=role,
            parent_id=self.agent_id,
            depth=self.depth + 1,
            call_chain=(*self.call_chain, role),
            shared_memory=(),  # its role's own, set where its run is built
        )


ToolFunction = Callable[..., Awaitable[str] | str]
ApprovalCheck: TypeAlias = Callable[[ToolContext, dict[str, Any]], "bool | Awaitable[bool]"]
"""``@tool(needs_approval=check)``: given a call's context and arguments, whether a person
must approve it (sync or async)."""


class ToolSource(Protocol):
    """Tools known only at run time (an MCP server's): listed before each model call.

    ``allows`` are the allow-lists the registry was restricted by (a tool must pass each;
    the source says what an entry admits), ``drops`` the names removed from it.
    """

    async def tools(
        self, ctx: ToolContext, allows: Sequence[frozenset[str]], drops: frozenset[str]
    ) -> Sequence[Tool]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _SourceView:
    source: ToolSource
    allows: tuple[frozenset[str], ...] = ()
    drops: frozenset[str] = frozenset()


@dataclass(slots=True)
class Tool:
    """One tool: a name, a description, a pydantic model of its parameters, and a function."""

    name: str
    description: str
    params: type[pydantic.BaseModel]
    fn: ToolFunction
    context_param: str | None = "ctx"  # the parameter that receives the ToolContext, if any
    idempotent: bool = False  # running a call twice does what running it once does (a read):
    # a durable session runs it again after a restart cut it short (retinue.durable)
    needs_approval: bool | ApprovalCheck = False  # a person approves each call (or those
    # the check says), in every permission mode (retinue.policy.gate)
    timeout_s: float | None = None  # a durable runner's bound on one call, each try (on
    # Temporal: its activity's; past it the call is stopped). None: the runner's own
    attempts: int | None = None  # tries of one call of an idempotent tool on a durable
    # runner (Temporal); None: the runner's own. A tool that is not idempotent runs once
    _spec: ToolSpec | None = field(default=None, repr=False)
    _inline: bool | None = field(default=None, repr=False)  # async: run on the loop
    _pace: Pace = field(default_factory=Pace, repr=False, compare=False)  # a plain one's calls

    @property
    def spec(self) -> ToolSpec:
        if self._spec is None:
            schema = self.params.model_json_schema()
            schema.pop("title", None)
            self._spec = ToolSpec(self.name, self.description, schema)
        return self._spec

    async def invoke(self, ctx: ToolContext, arguments: str) -> str:
        """Validate the model's raw JSON arguments and run the tool; raise ``ToolError``.
        The result as text (an image or document it returned as a one-line label)."""
        text, parts = await self.run_call(ctx, arguments)
        return "\n".join([text, *(f"[{p.label}]" for p in parts)]) if parts else text

    async def run_call(self, ctx: ToolContext, arguments: str) -> ToolOutput:
        """:meth:`invoke`, its result as ``(text, images and documents)`` (:func:`tool_output`)."""
        raw = json_arguments(arguments)
        try:
            args = self.params.model_validate(raw)
        except _pydantic().ValidationError as exc:
            raise ToolError(f"invalid arguments: {_summarise(exc)}") from None
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self._inline is None:
            self._inline = _is_async(self.fn)
        if self._inline:
            result = self.fn(**kwargs)
        else:
            result = await run_sync(self.fn, kwargs, self._pace)
        if inspect.isawaitable(result):
            result = await result
        return tool_output(result)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result with images or PDFs: ``content`` as a user message's (a string, or a
    list of text, :class:`~retinue.messages.ImagePart` / ``DocumentPart``, bytes, paths)."""

    content: Content


ToolOutput: TypeAlias = tuple[str, tuple[MediaPart, ...]]


def tool_output(result: object) -> ToolOutput:
    """A tool function's return value as ``(text, parts)``: a :class:`ToolResult`, an image or
    document part, or bytes that are PNG/JPEG/GIF/WebP/PDF become parts (too large or corrupt:
    :class:`~retinue.errors.MediaError`); other bytes are read as UTF-8 text; anything else
    is ``str()``-ed."""
    if isinstance(result, str):
        return result, ()
    if isinstance(result, ToolResult):
        return user_content(result.content)
    if isinstance(result, ImagePart | DocumentPart):
        return "", (result,)
    if isinstance(result, bytes | bytearray):
        data = bytes(result)
        if is_media(data):
            return "", (media_part(data),)
        return data.decode("utf-8", errors="replace"), ()
    return str(result), ()


def _is_async(fn: Callable[..., Any]) -> bool:
    """An ``async def`` (or an object whose ``__call__`` is one): it runs on the loop."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 -- a callable object's method
    )


def preview(text: str, limit: int = 200) -> str:
    """``text`` cut to about ``limit`` characters at a word boundary, with ``…`` when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def json_arguments(arguments: str) -> dict[str, Any]:
    """The model's raw arguments as a JSON object; ``ToolError`` saying what is wrong."""
    try:
        raw = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(raw, dict):
        raise ToolError("arguments must be a JSON object")
    return raw


def _pydantic() -> Any:
    """pydantic, imported when the first tool is declared (not by ``import retinue``)."""
    import pydantic

    return pydantic


def _summarise(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


@overload
def tool(name: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    name: str | None = None,
    description: str | None = None,
    *,
    needs_approval: bool | ApprovalCheck = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    name: str | Callable[..., Any] | None = None,
    description: str | None = None,
    *,
    needs_approval: bool | ApprovalCheck = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a typed function: ``@tool``, ``@tool()`` or ``@tool("Name", "...")``.

    The parameter schema comes from the signature (use ``Annotated[T, Field(description=...)]``
    to describe a parameter); the description defaults to the docstring. A parameter annotated
    :class:`ToolContext` receives the call's context and is not shown to the model.

    ``needs_approval=True`` puts every call to the agent's approver before it runs, in every
    permission mode; a function ``(ctx, arguments) -> bool`` (sync or async) decides per call.
    With nobody to answer, the call is refused and the model is told why.
    """
    if callable(name):
        return _make_tool(name, None, description)
    return lambda fn: _make_tool(fn, name, description, needs_approval)


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    needs_approval: bool | ApprovalCheck = False,
) -> Tool:
    if not callable(fn) or isinstance(fn, Tool):
        raise TypeError(f"@tool needs a function, not {type(fn).__name__}")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(f"@tool {fn.__name__}: cannot resolve an annotation ({exc})") from None
    fields: dict[str, Any] = {}
    context: str | None = None
    for pname, param in inspect.signature(fn).parameters.items():
        if _is_context(hints.get(pname)):
            context = pname
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"@tool {fn.__name__}: *args and **kwargs cannot be tool parameters")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"@tool {fn.__name__}: {pname!r} must not be positional-only")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints.get(pname, Any), default)
    pydantic = _pydantic()
    model = pydantic.create_model(  # type: ignore[call-overload]
        f"{fn.__name__}_params", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    doc = inspect.cleandoc(fn.__doc__ or "")
    if not isinstance(needs_approval, bool) and not callable(needs_approval):
        raise TypeError(f"@tool {fn.__name__}: needs_approval must be a bool or a function")
    made = Tool(name or fn.__name__, description or doc, model, fn, context)
    made.needs_approval = needs_approval
    return made


def _is_context(hint: Any) -> bool:
    """``ToolContext``, ``Annotated[ToolContext, ...]`` or ``ToolContext | None``."""
    if hint is ToolContext or get_origin(hint) is ToolContext:  # (ToolContext[MyDeps])
        return True
    if get_origin(hint) is Annotated:
        return _is_context(get_args(hint)[0])
    if get_origin(hint) in (Union, UnionType):
        return any(_is_context(a) for a in get_args(hint))
    return isinstance(hint, type) and issubclass(hint, ToolContext)


_NO_NAMES: frozenset[str] = frozenset()  # shared: an empty frozenset is not a singleton


class ToolRegistry:
    """Tools by name. ``restricted`` makes the view a role may use (its allow-list)."""

    __slots__ = ("_sourced", "_sources", "_tools", "_withheld")

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        withheld: Iterable[str] = (),
        sources: Iterable[_SourceView] = (),
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self._withheld = frozenset(withheld) or _NO_NAMES
        self._sources = tuple(sources)
        self._sourced = _NO_NAMES  # (every session has a registry of its own: kept lean)
        for t in tools:
            self.register(t)

    def add_source(self, source: ToolSource) -> None:
        """Tools listed at run time (see :class:`ToolSource` and :meth:`refresh`)."""
        self._sources = (*self._sources, _SourceView(source))

    async def refresh(self, ctx: ToolContext) -> None:
        """Ask every source for its current tools (a no-op without sources)."""
        if not self._sources:
            return
        fresh: dict[str, Tool] = {}
        for view in self._sources:
            for t in await view.source.tools(ctx, view.allows, view.drops):
                if t.name not in self._tools or t.name in self._sourced:
                    fresh.setdefault(t.name, t)
        for name in self._sourced - fresh.keys():
            self._tools.pop(name, None)
        self._tools.update(fresh)
        self._sourced = frozenset(fresh) or _NO_NAMES

    async def close_sources(self) -> None:
        """Stop what the sources started (MCP servers); safe to call twice."""
        for view in self._sources:
            await view.source.aclose()

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
            return ToolRegistry(self._own(), withheld=self._withheld, sources=self._sources)
        keep = frozenset(allowed)
        return ToolRegistry(
            (t for t in self._own() if t.name in keep),
            withheld=self._withheld | (self._tools.keys() - keep),
            sources=[replace(v, allows=(*v.allows, keep)) for v in self._sources],
        )

    def without(self, names: Iterable[str]) -> ToolRegistry:
        drop = frozenset(names)
        return ToolRegistry(
            (t for t in self._own() if t.name not in drop),
            withheld=self._withheld | (drop & self._tools.keys()),
            sources=[replace(v, drops=v.drops | drop) for v in self._sources],
        )

    def _own(self) -> list[Tool]:
        """The tools registered directly (a source's are listed again by each registry)."""
        return [t for n, t in self._tools.items() if n not in self._sourced]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResultMessage:
        """Run one call; every failure becomes an error result, never an exception.

        Cancellation (``asyncio.CancelledError``) is the one thing that propagates.
        """
        _started(call, ctx)
        parts: tuple[MediaPart, ...] = ()
        try:  # (the tool's coroutine awaited here: no frame of the registry's between)
            (content, parts), is_error = await self._tool(call).run_call(ctx, call.arguments), False
        except RetinueError as exc:  # ToolError and every other error Retinue explains itself
            content, is_error = f"Error: {exc}", True
        except Exception as exc:
            content, is_error = f"Error: {call.name} failed: {type(exc).__name__}: {exc}", True
        _finished(call, ctx, content, is_error, preview)
        return ToolResultMessage(call.id, call.name, content, is_error, parts)

    def _tool(self, call: ToolCall) -> Tool:
        t = self._tools.get(call.name)
        if t is None:
            if call.name in self._withheld:
                raise ToolError(f"tool {call.name!r} is not allowed for this agent")
            raise ToolError(
                f"unknown tool {call.name!r}; available tools: {', '.join(self._tools) or 'none'}"
            )
        return t


def refused(call: ToolCall, ctx: ToolContext, content: str) -> ToolResultMessage:
    """The error result of a call that did not run (a policy refused it,
    :mod:`retinue.policy.gate`), with the tool events a call that ran has (its preview: the
    first 200 characters)."""
    _started(call, ctx)
    _finished(call, ctx, content, True, _head)
    return ToolResultMessage(call.id, call.name, content, True)


def _started(call: ToolCall, ctx: ToolContext) -> None:
    """The one place a call's ``tool.started`` event is emitted (a listener is there)."""
    if ctx.events is not None:
        emit(ctx.events, TOOL_STARTED, ctx.agent_id, call_id=call.id, name=call.name,
             arguments=call.arguments)  # fmt: skip


def _finished(
    call: ToolCall, ctx: ToolContext, content: str, is_error: bool, shown: Callable[[str], str]
) -> None:
    """The one place a call's ``tool.finished`` event is emitted; ``shown`` makes its preview
    (work: only done for a listener)."""
    if ctx.events is not None:
        emit(ctx.events, TOOL_FINISHED, ctx.agent_id, call_id=call.id, name=call.name,
             is_error=is_error, preview=shown(content))  # fmt: skip


def _head(text: str) -> str:
    return text[:200]


def merge(*registries: ToolRegistry | Sequence[Tool]) -> ToolRegistry:
    """One registry holding the tools of several (later names win)."""
    out = ToolRegistry()
    for reg in registries:
        for t in reg._own() if isinstance(reg, ToolRegistry) else reg:
            out.register(t)
        if isinstance(reg, ToolRegistry):
            out._sources = (*out._sources, *reg._sources)
    return out
