"""Consolidation ("memorize"): one model call turns a finished session into memory.

The model receives the current core blocks, archival passages similar to the conversation,
and the conversation itself (rendered as text and trimmed to a token budget, newest kept),
and must answer by calling the ``memorize`` tool. Its arguments are validated with pydantic
and against the block limits; an invalid answer is sent back once more with the reason, a
failing call is retried with backoff. The result is written in one transaction, skipping
passages that duplicate stored ones. A role that declares shared blocks sees them too, and
may rewrite the writable ones (in the same transaction); a read-only one named in the answer
is sent back as invalid.

The transcript is kept (on disk in ``pending/`` for SQLite, in a table for PostgreSQL) from
before the model call until the commit, so a failure, a cancellation or a killed process
never loses it: ``retry_pending`` re-runs it. The store's steps are synchronous for SQLite
(run in a worker thread) and coroutines for PostgreSQL (awaited); :func:`_step` runs both.

The embedded local model (``local:...``) reads a long prompt slowly on a CPU, so its
consolidation is bounded (:data:`LOCAL_BOUNDS`): a shorter transcript, fewer and shorter
similar passages, a cap on the tokens it writes, fewer attempts, and a time limit; one that
runs out keeps its transcript like any failure. Consolidations begun under a
:class:`ConsolidationScope` (:data:`consolidation_scope`) can be abandoned at once, each
keeping its transcript: the chat does so when the user will not wait.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pydantic

from retinue.errors import BlockConflictError, MemoryStoreError
from retinue.llm.base import ToolSpec
from retinue.llm.tokens import estimate_text_tokens
from retinue.memory.base import ConsolidationOptions, ConsolidationStore, NewPassage
from retinue.memory.pending import PendingTranscript
from retinue.memory.store import Block, Passage, SharedBlock
from retinue.memory.text import normalize
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.text import scrub
from retinue.telemetry import trace as _tel

if TYPE_CHECKING:
    from retinue.llm.base import Model

Store: TypeAlias = ConsolidationStore  # any store: this module imports no concrete one

__all__ = [
    "LOCAL_BOUNDS",
    "MEMORIZE_TOOL",
    "BlockUpdate",
    "ConsolidationOptions",
    "ConsolidationResult",
    "ConsolidationScope",
    "LocalBounds",
    "Memorize",
    "RetryProgress",
    "RetryReport",
    "build_request",
    "consolidate_session",
    "consolidation_run",
    "consolidation_scope",
    "render_transcript",
    "retry_pending",
]

log = logging.getLogger("retinue.memory")

_TOOL_RESULT_CHARS = 2000
_CONFLICT_ATTEMPTS = 3


class BlockUpdate(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    block: str = pydantic.Field(description="name of the core memory block to rewrite")
    value: str = pydantic.Field(description="the complete new text of the block")


class Memorize(pydantic.BaseModel):
    """What the model writes: whole-block rewrites and new archival passages."""

    model_config = pydantic.ConfigDict(extra="forbid")
    block_updates: list[BlockUpdate] = pydantic.Field(
        default_factory=list,
        description="core blocks to rewrite; omit blocks that need no change",
    )
    new_passages: list[str] = pydantic.Field(
        default_factory=list,
        description="self-contained facts worth recalling later, one per passage; "
        "do not repeat passages already stored",
    )


def _memorize_spec() -> ToolSpec:
    schema = Memorize.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return ToolSpec(
        "memorize",
        "Save what this session taught you into long-term memory.",
        schema,
    )


MEMORIZE_TOOL = _memorize_spec()

_INSTRUCTIONS = """\
You maintain the long-term memory of the agent role {role!r}. A session of that role has \
just ended. Read its conversation and decide what is worth remembering for future sessions.
- Core blocks are always shown to the agent; keep them short, current and within their \
limits. To change a block, give its complete new text.
- Archival passages are searched on demand: store durable, self-contained facts (names, \
preferences, decisions, results). Do not store what is already stored.
- If nothing is worth remembering, call memorize with empty lists.
Answer only by calling the memorize tool exactly once."""


@dataclass(frozen=True, slots=True)
class LocalBounds:
    """How far a local model's consolidation may go: transcript tokens, similar passages
    (and characters of each), tokens written, model calls, and seconds in all."""

    token_budget: int = 1_500
    similar_passages: int = 3
    passage_chars: int = 400
    max_tokens: int = 384
    attempts: int = 2
    seconds: float = 180.0


LOCAL_BOUNDS = LocalBounds()

_ABANDONED = "abandoned before the model answered (the user did not wait)"


class ConsolidationScope:
    """Consolidations begun while :data:`consolidation_scope` holds this scope can be stopped
    together: :meth:`abandon` ends each at once as a failure (its transcript kept for
    ``retry_pending``), and fails any that begins before :meth:`resume` the same way."""

    def __init__(self) -> None:
        self.abandoned = False
        self._running: set[asyncio.Task[Any]] = set()

    def abandon(self) -> int:
        """Stop the consolidations under way; returns how many there were."""
        self.abandoned = True
        for task in self._running:
            task.cancel()
        return len(self._running)

    def resume(self) -> None:
        self.abandoned = False

    async def run(self, step: Callable[[], Awaitable[Any]]) -> Any:
        """``step()`` in a task :meth:`abandon` may cancel; abandoned, it raises
        :class:`MemoryStoreError` (a cancellation of the caller propagates as usual)."""
        if self.abandoned:
            raise MemoryStoreError(_ABANDONED)
        task = asyncio.ensure_future(step())
        self._running.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self.abandoned and task.cancelled() and (me is None or not me.cancelling()):
                raise MemoryStoreError(_ABANDONED) from None
            raise
        finally:
            self._running.discard(task)


consolidation_scope: ContextVar[ConsolidationScope | None] = ContextVar(
    "retinue_consolidation_scope", default=None
)
"""The scope the consolidations begun in this context belong to (none: they cannot be
abandoned, only cancelled)."""

consolidation_run: ContextVar[str | None] = ContextVar("retinue_consolidation_run", default=None)
"""The id the consolidation begun in this context runs under, when its caller keeps one (a
durable session's, recorded before it began: run again after a restart under the same id, a
consolidation already committed is not applied twice); none: a fresh id."""


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    ok: bool
    run_id: str
    blocks_updated: int = 0
    passages_added: int = 0
    already_applied: bool = False
    error: str = ""
    transcript: Path | None = None


@dataclass(slots=True)
class RetryReport:
    applied: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def render_transcript(messages: Sequence[Message], token_budget: int) -> str:
    """The conversation as text, newest kept whole within ``token_budget`` tokens."""
    lines: list[str] = []
    used = 0
    kept = 0
    convo = [m for m in messages if not isinstance(m, SystemMessage)]
    for m in reversed(convo):
        text = scrub(_line(m))
        cost = estimate_text_tokens(text) + 4
        if used + cost > token_budget and kept:
            break
        if used + cost > token_budget:
            text = "…" + text[-max(0, token_budget * 4 - 8) :]
        lines.append(text)
        used += cost
        kept += 1
    if kept < len(convo):
        lines.append(f"[{len(convo) - kept} earlier message(s) omitted]")
    return "\n".join(reversed(lines))


def _line(m: Message) -> str:
    if isinstance(m, UserMessage):
        return f"USER: {m.content}"
    if isinstance(m, AssistantMessage):
        parts = [f"ASSISTANT: {m.content}"] if m.content else []
        parts += [f"ASSISTANT called {t.name}({t.arguments})" for t in m.tool_calls]
        return "\n".join(parts) or "ASSISTANT: (no text)"
    if isinstance(m, ToolResultMessage):
        body = m.content
        if len(body) > _TOOL_RESULT_CHARS:
            body = body[:_TOOL_RESULT_CHARS] + f" […{len(m.content) - _TOOL_RESULT_CHARS} chars]"
        return f"TOOL RESULT ({m.name}{', error' if m.is_error else ''}): {body}"
    return f"SYSTEM: {m.content}"


def build_request(
    role: str,
    blocks: Sequence[Block],
    similar: Sequence[Passage],
    transcript: str,
    passage_chars: int | None = None,
    shared: Sequence[tuple[Block, bool]] = (),
) -> list[Message]:
    """The messages of the consolidation call (each similar passage cut to
    ``passage_chars`` when given; ``shared`` blocks with whether the role may write them)."""
    parts = ["# Current core memory"]
    for b in blocks:
        parts.append(f'<{b.name} limit="{b.limit} chars">\n{b.value}\n</{b.name}>')
    if shared:
        parts.append(
            "# Shared blocks (other roles read them too: keep what they wrote; rewrite only "
            "the writable ones, by name, and only with what they all should know)"
        )
    for b, writable in shared:
        access = "writable" if writable else "read-only"
        parts.append(
            f'<{b.name} shared="{access}" limit="{b.limit} chars">\n{b.value}\n</{b.name}>'
        )
    parts.append("# Stored archival passages related to this session")
    for p in similar:
        cut = passage_chars is not None and len(p.content) > passage_chars
        parts.append(f"- {p.content[:passage_chars] + '…' if cut else p.content}")
    if not similar:
        parts.append("(none)")
    parts.append("# The session's conversation")
    parts.append(transcript)
    return [SystemMessage(_INSTRUCTIONS.format(role=role)), UserMessage("\n".join(parts))]


def _parse(
    reply: AssistantMessage, limits: Mapping[str, int], read_only: Sequence[str] = ()
) -> Memorize:
    """The validated ``memorize`` arguments (``limits``: the blocks it may rewrite,
    ``read_only``: shared blocks it may not); ``ValueError`` says what to fix."""
    calls = [t for t in reply.tool_calls if t.name == "memorize"]
    if not calls:
        raise ValueError("you did not call the memorize tool; call it exactly once")
    try:  # json accepts lone surrogate escapes (a model can emit them); the store scrubs them
        result = Memorize.model_validate(json.loads(scrub(calls[0].arguments or "{}")))
    except json.JSONDecodeError as exc:
        raise ValueError(f"memorize arguments are not valid JSON: {exc}") from None
    except pydantic.ValidationError as exc:
        raise ValueError(f"invalid memorize arguments: {exc.errors(include_url=False)}") from None
    problems = []
    names = [u.block for u in result.block_updates]
    for u in result.block_updates:
        limit = limits.get(u.block)
        if u.block in read_only:
            problems.append(f"block {u.block!r} is shared read-only with this role; leave it out")
        elif limit is None:
            problems.append(f"unknown block {u.block!r} (blocks: {', '.join(limits)})")
        elif len(u.value) > limit:
            problems.append(f"block {u.block!r} has {len(u.value)} chars, limit {limit}")
        if names.count(u.block) > 1:
            problems.append(f"block {u.block!r} updated more than once")
    if problems:
        raise ValueError("; ".join(dict.fromkeys(problems)))
    return result


def _for_model(
    model: Model, options: ConsolidationOptions
) -> tuple[Model, ConsolidationOptions, LocalBounds | None]:
    """The model and options to consolidate with: a local model's bounded (see
    :data:`LOCAL_BOUNDS`; a copy of the model writes fewer tokens), others' as they are."""
    if not model.name.startswith("local:"):
        return model, options, None
    bounds = LOCAL_BOUNDS
    options = dataclasses.replace(
        options,
        token_budget=min(options.token_budget, bounds.token_budget),
        similar_passages=min(options.similar_passages, bounds.similar_passages),
        attempts=min(options.attempts, bounds.attempts),
    )
    writes = getattr(model, "max_tokens", None)
    if isinstance(writes, int) and writes > bounds.max_tokens:
        model = copy.copy(model)  # (shares the original's worker and lock)
        model.max_tokens = bounds.max_tokens  # type: ignore[attr-defined]
    return model, options, bounds


async def _ask(
    model: Model,
    request: list[Message],
    options: ConsolidationOptions,
    limits: Mapping[str, int],
    seconds: float | None = None,
    read_only: Sequence[str] = (),
) -> Memorize:
    """Call the model until it gives a valid ``memorize`` call, within ``seconds`` in all;
    raise the last failure."""
    try:
        async with asyncio.timeout(seconds):
            return await _attempts(model, request, options, limits, read_only)
    except TimeoutError:
        raise TimeoutError(
            f"{model.name} did not finish the consolidation within {seconds:g} s"
        ) from None


async def _attempts(
    model: Model,
    request: list[Message],
    options: ConsolidationOptions,
    limits: Mapping[str, int],
    read_only: Sequence[str],
) -> Memorize:
    messages = list(request)
    last: Exception = RuntimeError("no attempt made")
    for attempt in range(max(1, options.attempts)):
        if attempt:
            await asyncio.sleep(options.retry_delay * 2 ** (attempt - 1))
        try:
            reply = (await model.complete(messages, [MEMORIZE_TOOL])).message
        except Exception as exc:
            last = exc
            continue
        try:
            return _parse(reply, limits, read_only)
        except ValueError as exc:
            last = exc
            messages.append(reply)
            messages.extend(
                ToolResultMessage(t.id, t.name, f"Error: {exc}", True) for t in reply.tool_calls
            )
            if not reply.tool_calls:
                messages.append(UserMessage(f"Error: {exc}"))
    raise last


def _similar_query(transcript: str) -> str:
    """A search query from the newest end of the transcript."""
    return " ".join(w for w in normalize(transcript[-4000:]).split() if len(w) > 3)


async def consolidate_session(
    store: Store,
    *,
    tenant: str,
    role: str,
    session_id: str,
    messages: Sequence[Message],
    model: Model,
    run_id: str | None = None,
    kept: Path | None = None,
    shared: Sequence[SharedBlock] = (),
) -> ConsolidationResult:
    """Consolidate one session into ``store`` (and the writable ``shared`` blocks); never
    raises except on cancellation."""
    run_id = run_id or consolidation_run.get() or uuid.uuid4().hex
    if not any(isinstance(m, UserMessage | AssistantMessage) for m in messages):
        return ConsolidationResult(True, run_id)
    path = kept
    try:
        if path is None:
            path = await _step(
                store.pending.write_inflight,
                run_id=run_id,
                tenant=tenant,
                role=role,
                session_id=session_id,
                model=model.name,
                messages=messages,
            )
        scope = consolidation_scope.get()
        with _tel.span("memory consolidate", **{"gen_ai.agent.name": role}):
            written = await _reread_on_conflict(
                lambda: _consolidate(
                    store, tenant, role, session_id, messages, model, run_id, shared
                ),
                role,
                scope,
            )
    except asyncio.CancelledError:
        if path is not None:
            await _keep(store, path, "cancelled before the memory was written")
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        kept_at = await _keep(store, path, error) if path is not None else None
        where = (
            f"transcript kept at {kept_at} (run `retinue memory retry`)"
            if kept_at is not None
            else "the transcript could not be kept"
        )
        log.error(
            "memory consolidation of session %s (tenant %r, role %r) failed: %s; %s",
            session_id, tenant, role, error, where,
        )  # fmt: skip
        return ConsolidationResult(False, run_id, error=error, transcript=kept_at)
    await _step(store.pending.remove, path, thread=False)
    if written is None:
        return ConsolidationResult(True, run_id, already_applied=True)
    return ConsolidationResult(True, run_id, written[0], written[1])


async def _reread_on_conflict(
    step: Callable[[], Awaitable[tuple[int, int] | None]],
    role: str,
    scope: ConsolidationScope | None = None,
) -> tuple[int, int] | None:
    """Run ``step`` (within ``scope``); when a block changed meanwhile and will not merge,
    read and ask again."""
    for attempt in range(_CONFLICT_ATTEMPTS):
        try:
            return await (scope.run(step) if scope is not None else step())
        except BlockConflictError:
            if attempt == _CONFLICT_ATTEMPTS - 1:
                raise
            log.info("core memory of %r changed during consolidation; reading it again", role)
    raise AssertionError("unreachable")


async def _consolidate(
    store: Store,
    tenant: str,
    role: str,
    session_id: str,
    messages: Sequence[Message],
    model: Model,
    run_id: str,
    shared: Sequence[SharedBlock] = (),
) -> tuple[int, int] | None:
    model, options, bounds = _for_model(model, store.options)
    transcript = render_transcript(messages, options.token_budget)
    blocks = await store.blocks(tenant, role)
    found = await store.shared_blocks(tenant, [s.name for s in shared]) if shared else []
    pairs = [(b, s.writable) for b, s in zip(found, shared, strict=True)]
    similar = await store.search(tenant, role, _similar_query(transcript), options.similar_passages)
    cut = bounds.passage_chars if bounds is not None else None
    request = build_request(role, blocks, similar, transcript, cut, pairs)
    seconds = bounds.seconds if bounds is not None else None
    limits = {**{b.name: b.limit for b, w in pairs if w}, **store.block_limits}
    read_only = [b.name for b, w in pairs if not w and b.name not in store.block_limits]
    result = await _ask(model, request, options, limits, seconds, read_only)
    texts = [p.strip() for p in result.new_passages if p.strip()]
    vectors = await store.embed(texts) if texts else None
    passages = [
        NewPassage(t, f"session:{session_id}", vectors[i] if vectors else None)
        for i, t in enumerate(texts)
    ]
    current = {b.name: b for b, _ in pairs} | {b.name: b for b in blocks}  # own names first
    changed = {
        u.block: u.value
        for u in result.block_updates
        if u.block not in current or current[u.block].value != u.value
    }
    own = {n: v for n, v in changed.items() if n in store.block_limits}
    return await _step(
        store.apply_consolidation,
        run_id=run_id,
        tenant=tenant,
        role=role,
        session_id=session_id,
        block_updates=own,
        passages=passages,
        base=current,
        shared_updates={n: v for n, v in changed.items() if n not in own},
    )


async def _step(fn: Callable[..., Any], /, *args: Any, thread: bool = True, **kwargs: Any) -> Any:
    """Await ``fn`` if it is a coroutine function (PostgreSQL); else call it, in a worker
    thread unless ``thread`` is false (SQLite, whose quick file steps run in place)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    if thread:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)


async def _keep(store: Store, path: Path, error: str) -> Path | None:
    try:
        return await _step(store.pending.mark_failed, path, error, thread=False)
    except (OSError, MemoryStoreError) as exc:
        log.error("could not mark transcript %s as failed: %s", path, exc)
        on_disk = isinstance(exc, OSError) and await asyncio.to_thread(path.exists)
        return path if on_disk else None


RetryProgress: TypeAlias = Callable[[int, int, PendingTranscript, ConsolidationResult | None], None]
"""Told ``(n, total, transcript, None)`` as the n-th kept transcript's retry begins (from 1),
then ``(n, total, transcript, result)`` when it ends."""


async def retry_pending(
    store: Store,
    model_for: Callable[[str], Model],
    *,
    stale_after: float = 3600.0,
    progress: RetryProgress | None = None,
    shared_for: Callable[[str], Sequence[SharedBlock]] | None = None,
) -> RetryReport:
    """Re-run every kept transcript; a success deletes its file. ``shared_for(role)`` gives
    the shared blocks a role declares (without it, a retry writes the role's own memory)."""
    report = RetryReport()
    items = await _step(store.pending.ready, stale_after=stale_after)
    for n, item in enumerate(items, 1):
        if progress is not None:
            progress(n, len(items), item, None)
        shared = shared_for(item.role) if shared_for is not None else ()
        result = await _retry_one(store, item, model_for, shared)
        if progress is not None:
            progress(n, len(items), item, result)
        if result.ok:
            report.applied.append(item.session_id)
        else:
            report.failed.append((item.session_id, result.error))
    return report


async def _retry_one(
    store: Store,
    item: PendingTranscript,
    model_for: Callable[[str], Model],
    shared: Sequence[SharedBlock] = (),
) -> ConsolidationResult:
    try:
        model = model_for(item.model)
    except Exception as exc:
        return ConsolidationResult(False, item.run_id, error=f"{type(exc).__name__}: {exc}")
    return await consolidate_session(
        store,
        tenant=item.tenant,
        role=item.role,
        session_id=item.session_id,
        messages=item.messages,
        model=model,
        run_id=item.run_id,
        kept=item.path,
        shared=shared,
    )
