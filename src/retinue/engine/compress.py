"""AutoCompress: keep a conversation inside its model's context window.

:class:`AutoCompressor` is the engine's :class:`~retinue.engine.config.ContextKeeper`. Before
every model call it sizes the request (the provider's prompt-token figure for the previous
call plus an estimate of what was appended since) and, past ``threshold`` of the model's
input budget (:mod:`retinue.llm.profiles`), it asks the same model once to summarise the
older part of the conversation into a structured working state. The older messages are then
replaced, in place, by one user message ``[Summary of earlier conversation] ...`` placed
right after the system prompt (a user message is accepted by every provider in that
position). The leading system messages and the newest messages are kept; a cut never falls
between an assistant message's tool calls and their results. Old bulky tool results in the
kept tail are trimmed with a marker.

Reasoning parts (signed thinking blocks, encrypted reasoning) are never summarised nor
edited: the summary reads only text and tool calls, and the parts of the summarised
messages go with them. A signed block is valid only after the exact prefix it was made
after, which a compression changes; so the kept turns that are over lose theirs too, as
Anthropic advises for summarised histories ("remove the thinking in the retained turns",
https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks;
earlier turns' blocks may be left out, extended thinking, "Preserving thinking blocks").
The turn in progress keeps its own: its tool calls cannot be sent without them.

Before any summary, a first stage that costs no model call (:mod:`retinue.engine.context_edit`,
``edit``) clears old tool results and settled reasoning once the request passes its own, lower
trigger; the summary runs only when the request is still past ``threshold`` afterwards.
Each clearing is reported as a ``compressed`` event with ``reason="context_edit"``.

When the provider still answers "context too long", :meth:`AutoCompressor.on_context_too_long`
compresses harder (a smaller tail, every bulky tool result trimmed) and the loop retries.

A failing summary call never loses the conversation: the messages stay as they were, the
failure is logged and reported as a ``compressed`` event with ``ok=False``, and the run goes
on. Every compression emits :data:`retinue.events.COMPRESSED` with ``before_tokens``,
``after_tokens``, ``removed_messages``, ``trimmed_results``, ``reason`` and ``ok``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace

from retinue import _tracer
from retinue.engine.context_edit import ContextEdit, EditResult, clear_context
from retinue.engine.observer import RunTracer
from retinue.errors import ConfigError, ModelError
from retinue.events import COMPRESSED, MODEL_CALLED, emit
from retinue.llm.base import Model
from retinue.llm.profiles import ModelProfile, profile_for
from retinue.llm.tokens import estimate_text_tokens, estimate_tokens
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.policy.hooks import pre_compact
from retinue.tools.base import ToolContext

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARY_PROMPT",
    "AutoCompressor",
    "CompressionResult",
    "choose_cut",
    "drop_settled_reasoning",
    "is_summary",
    "render_transcript",
    "trim_tool_results",
]

log = logging.getLogger("retinue.compress")

SUMMARY_PREFIX = "[Summary of earlier conversation]"
TRIM_MARKER = "[... {n} characters trimmed by context compression ...]"

SUMMARY_PROMPT = """\
You compress the earlier part of an AI agent's conversation into the working state the agent \
will continue from. You receive a transcript of the older messages; it may begin with an \
earlier summary, which you merge in, dropping nothing that is still relevant.

Write only the working state, in exactly this structure, with short bullet points:

## Task
## Decisions
## Facts learned
## Files touched
## Open questions
## Next step

Keep the concrete details the agent will need again: names, paths, numbers, identifiers, \
commands, error messages, the user's preferences and requests. Write "none" under a heading \
with nothing to say. Do not invent anything that is not in the transcript. Use at most about \
{words} words."""

_MAX_TRACKED = 512
_MIN_GAIN = 0.05  # an automatic summary must replace this share of the budget
_DEFAULT_EDIT = ContextEdit()


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What one compression did (token figures are the request size before and after)."""

    before_tokens: int
    after_tokens: int
    removed_messages: int
    trimmed_results: int
    summary: str
    reason: str


@dataclass(frozen=True, slots=True)
class _Sent:
    """What was sent in the last model call on one message list."""

    count: int  # len(messages) at that call
    last: Message | None  # messages[count - 1], to notice a list changed behind our back
    estimate: int  # estimate_tokens(messages) at that call
    overhead: int  # provider's figure minus our estimate (tool specs, formatting)


class AutoCompressor:
    """A :class:`~retinue.engine.config.ContextKeeper` that summarises old messages.

    ``threshold``: compress when the request passes this fraction of the input budget
    (window minus output reserve). ``context_window`` / ``output_reserve`` override the
    model's profile; ``profiles`` maps model names or name prefixes to profiles (see
    :func:`~retinue.llm.profiles.profile_for`). ``keep_ratio`` / ``hard_keep_ratio``: the
    share of the budget the kept tail may use in a normal / forced compression.
    ``trim_over_tokens``: tool results in the kept tail bigger than this are trimmed (the
    newest batch only in a forced compression). ``summary_model`` summarises instead of the
    agent's own model. ``memorize``: when the agent has memory, hand the messages being
    compressed away to ``ctx.memory.consolidate`` first (one more model call). ``edit``: the
    first stage that clears old tool results and reasoning without a model call
    (:class:`~retinue.engine.context_edit.ContextEdit`; None turns it off).

    One instance may serve many agents at once: it keys what it tracks by message list.
    """

    def __init__(
        self,
        *,
        threshold: float = 0.8,
        context_window: int | None = None,
        output_reserve: int | None = None,
        profiles: Mapping[str, ModelProfile] | None = None,
        keep_ratio: float = 0.3,
        hard_keep_ratio: float = 0.1,
        trim_over_tokens: int = 2_000,
        summary_model: Model | None = None,
        summary_words: int = 400,
        memorize: bool = False,
        edit: ContextEdit | None = _DEFAULT_EDIT,
    ) -> None:
        if not 0 < threshold <= 1:
            raise ConfigError(f"compression threshold must be in (0, 1], not {threshold}")
        if not 0 < hard_keep_ratio <= keep_ratio < threshold:
            raise ConfigError(
                "compression ratios need 0 < hard_keep_ratio <= keep_ratio < threshold"
            )
        self.threshold = threshold
        self.context_window = context_window
        self.output_reserve = output_reserve
        self.profiles = dict(profiles or {})
        self.keep_ratio = keep_ratio
        self.hard_keep_ratio = hard_keep_ratio
        self.trim_over_tokens = trim_over_tokens
        self.summary_model = summary_model
        self.summary_words = summary_words
        self.memorize = memorize
        self.edit = edit
        self._sent: OrderedDict[int, _Sent] = OrderedDict()

    # -- budget and size -------------------------------------------------------------------

    def profile(self, model: Model) -> ModelProfile:
        """The model's profile, with this compressor's overrides applied."""
        base = profile_for(model.name, self.profiles)
        if self.context_window is None and self.output_reserve is None:
            return base
        window = self.context_window or base.context_window
        reserve = self.output_reserve
        if reserve is None:
            reserve = min(base.output_reserve, window // 4)
        return ModelProfile(window, reserve)

    def budget(self, model: Model) -> int:
        """Tokens a request to ``model`` may use (window minus output reserve)."""
        return self.profile(model).input_budget

    def request_size(self, messages: Sequence[Message], last_input_tokens: int) -> int:
        """The size of the next request on ``messages``, in tokens.

        The provider's figure for the previous call plus an estimate of what was appended
        since; when there is no usable figure, an estimate of the whole list corrected by
        what the provider reported last time on this list.
        """
        sent = self._sent.get(id(messages))
        if sent is None:
            return estimate_tokens(messages)
        if last_input_tokens > 0 and _extends(messages, sent):
            return last_input_tokens + estimate_tokens(messages[sent.count :])
        return max(estimate_tokens(messages) + sent.overhead, 0)

    def _record(self, messages: Sequence[Message]) -> None:
        """Remember what the coming model call sends (keeping the learned offset)."""
        key = id(messages)
        old = self._sent.pop(key, None)
        overhead = old.overhead if old is not None else 0
        last = messages[-1] if messages else None
        self._sent[key] = _Sent(len(messages), last, estimate_tokens(messages), overhead)
        while len(self._sent) > _MAX_TRACKED:
            self._sent.popitem(last=False)

    # -- the ContextKeeper protocol --------------------------------------------------------

    async def before_call(
        self, messages: list[Message], model: Model, ctx: ToolContext, last_input_tokens: int
    ) -> None:
        """Compress ``messages`` in place when the next request passes the threshold."""
        if last_input_tokens > 0:
            self._learn(messages, last_input_tokens)
        size = self.request_size(messages, last_input_tokens)
        budget = self.budget(model)
        if self.edit is not None and size > self.edit.trigger * budget:
            size = self._clear(messages, ctx, size, budget, hard=False)
        if size > self.threshold * budget:
            try:
                await self._compress(messages, model, ctx, size, hard=False, reason="threshold")
            except Exception as exc:
                self._failed(ctx, size, "threshold", exc)
        self._record(messages)

    async def on_context_too_long(
        self, messages: list[Message], model: Model, ctx: ToolContext
    ) -> bool:
        """Compress harder once; False when nothing could be shrunk or the summary failed.

        Old tool results are cleared first (all but the unread ones); when that at least
        halves the request and brings it under the threshold, no summary is written (the
        estimate the provider just proved wrong must be beaten by a margin)."""
        size = self.request_size(messages, 0)
        if self.edit is not None:
            cleared = self._clear(messages, ctx, size, self.budget(model), hard=True)
            if cleared <= min(size // 2, self.threshold * self.budget(model)):
                self._record(messages)
                return True
            size = cleared
        try:
            result = await self._compress(
                messages, model, ctx, size, hard=True, reason="context_too_long"
            )
        except Exception as exc:
            self._failed(ctx, size, "context_too_long", exc)
            return False
        self._record(messages)
        return result is not None

    async def compress_now(
        self, messages: list[Message], model: Model, ctx: ToolContext, *, hard: bool = False
    ) -> CompressionResult | None:
        """Compress ``messages`` in place now, whatever their size (the chat's ``/compress``).

        Returns None when there is nothing to compress. A failing summary call leaves the
        messages unchanged and raises :class:`~retinue.errors.ModelError`.
        """
        size = self.request_size(messages, 0)
        try:
            result = await self._compress(messages, model, ctx, size, hard=hard, reason="manual")
        except ModelError as exc:
            self._failed(ctx, size, "manual", exc)
            raise
        except Exception as exc:
            self._failed(ctx, size, "manual", exc)
            raise ModelError(f"compression failed: {type(exc).__name__}: {exc}") from exc
        self._record(messages)
        return result

    # -- the work --------------------------------------------------------------------------

    def _learn(self, messages: Sequence[Message], last_input_tokens: int) -> None:
        """Update the estimate's offset from the provider's figure for the last call."""
        sent = self._sent.get(id(messages))
        if sent is not None and _extends(messages, sent):
            overhead = last_input_tokens - sent.estimate
            self._sent[id(messages)] = _Sent(sent.count, sent.last, sent.estimate, overhead)

    def _clear(
        self, messages: list[Message], ctx: ToolContext, size: int, budget: int, *, hard: bool
    ) -> int:
        """The first stage (see the module): clear in place when it frees enough; returns the
        request's new size."""
        edit = self.edit
        if edit is None:
            return size
        new, result = clear_context(
            messages,
            keep_tool_results=0 if hard else edit.keep_tool_results,
            clear_thinking=edit.clear_thinking,
            exclude_tools=edit.exclude_tools,
        )
        least = 1 if hard else max(edit.clear_at_least * budget, 1)
        if result.freed_tokens < least:
            return size  # not worth the prompt cache it would cost
        messages[:] = new
        after = max(size - result.freed_tokens, 0)
        self._report_edit(ctx, size, after, result, hard=hard)
        return after

    def _report_edit(
        self, ctx: ToolContext, size: int, after: int, r: EditResult, *, hard: bool
    ) -> None:
        emit(ctx.events, COMPRESSED, ctx.agent_id, before_tokens=size, after_tokens=after,
             removed_messages=0, trimmed_results=r.cleared_results,
             cleared_reasoning=r.cleared_reasoning, reason="context_edit", hard=hard,
             ok=True)  # fmt: skip
        log.info("cleared %d old tool results and %d reasoning parts of %s: %d -> %d tokens",
                 r.cleared_results, r.cleared_reasoning, ctx.agent_id, size, after)  # fmt: skip

    async def _compress(
        self,
        messages: list[Message],
        model: Model,
        ctx: ToolContext,
        size: int,
        *,
        hard: bool,
        reason: str,
    ) -> CompressionResult | None:
        """Summarise and trim ``messages`` in place; None when there was nothing to win.
        Tracing on, inside the tracer's span (:class:`~retinue.engine.observer.RunTracer`)."""
        tracer: RunTracer | None = _tracer.current
        with nullcontext() if tracer is None else tracer.compress(hard=hard, reason=reason):
            budget = self.budget(model)
            head = _head_length(messages)
            body = messages[head:]
            cut = self._plan_cut(body, budget, hard=hard, automatic=reason == "threshold")
            tail_start = cut or 0
            limit = self.trim_over_tokens // (2 if hard else 1)
            tail, trimmed = trim_tool_results(body[tail_start:], limit, newest_too=hard)
            if cut is None and not trimmed:
                return None
            tail = drop_settled_reasoning(tail)
            summary = ""
            if cut is not None:
                await pre_compact(ctx, "manual" if reason == "manual" else "auto")  # PreCompact
                if self.memorize:
                    await self._memorize(body[:cut], model, ctx)
                summary = await self._summarise(body[:cut], model, budget, ctx)
            summary_msgs = [UserMessage(f"{SUMMARY_PREFIX}\n{summary}")] if summary else []
            new = [*messages[:head], *summary_msgs, *tail]
            after = size - estimate_tokens(messages) + estimate_tokens(new)
            if after >= size:
                return None  # the summary is no smaller than what it would replace
            messages[:] = new
            result = CompressionResult(size, after, tail_start, trimmed, summary, reason)
            self._report(ctx, result)
            return result

    def _plan_cut(
        self, body: Sequence[Message], budget: int, *, hard: bool, automatic: bool
    ) -> int | None:
        """Where the kept tail starts; None when summarising is impossible or not worth it.

        The tail may use ``keep_ratio`` of the budget (``hard_keep_ratio`` when forced), and
        at most half of the conversation (a quarter when forced), so a manual or forced
        compression of a conversation far below the budget still shrinks it.
        """
        ratio, share = (self.hard_keep_ratio, 0.25) if hard else (self.keep_ratio, 0.5)
        keep = min(ratio * budget, share * estimate_tokens(body))
        cut = choose_cut(body, int(keep))
        if cut is not None and automatic and estimate_tokens(body[:cut]) < _MIN_GAIN * budget:
            return None  # too little to win: a summary call per model call would follow
        return cut

    def _report(self, ctx: ToolContext, r: CompressionResult) -> None:
        emit(
            ctx.events,
            COMPRESSED,
            ctx.agent_id,
            before_tokens=r.before_tokens,
            after_tokens=r.after_tokens,
            removed_messages=r.removed_messages,
            trimmed_results=r.trimmed_results,
            reason=r.reason,
            ok=True,
        )
        log.info(
            "compressed %s: %d -> %d tokens (%s)",
            ctx.agent_id,
            r.before_tokens,
            r.after_tokens,
            r.reason,
        )

    async def _summarise(
        self, older: Sequence[Message], model: Model, budget: int, ctx: ToolContext
    ) -> str:
        words = max(50, min(self.summary_words, budget // 10))
        transcript = render_transcript(older, max(budget - 2 * words - 600, 500))
        request: list[Message] = [
            SystemMessage(SUMMARY_PROMPT.format(words=words)),
            UserMessage(transcript),
        ]
        response = await (self.summary_model or model).complete(request)
        emit(ctx.events, MODEL_CALLED, ctx.agent_id, purpose="compress",
             input_tokens=response.usage.input_tokens,
             output_tokens=response.usage.output_tokens)  # fmt: skip
        text = response.message.content.strip()
        if not text:
            raise ModelError("the summary model returned an empty summary")
        limit = words * 12  # about twice the asked length, in characters
        if len(text) > limit:
            text = text[:limit] + "\n" + TRIM_MARKER.format(n=len(text) - limit)
        return text

    async def _memorize(self, older: Sequence[Message], model: Model, ctx: ToolContext) -> None:
        memory = ctx.memory
        if memory is None:
            return
        try:
            written = await memory.consolidate(
                tenant=ctx.tenant,
                role=ctx.role,
                session_id=f"{ctx.agent_id}#compress",
                messages=list(older),
                model=model,
                **({"shared": ctx.shared_memory} if ctx.shared_memory else {}),  # its role's
            )
            if not written:
                log.warning("compressed-away messages of %s were not written to memory (kept "
                            "for `retinue memory retry`)", ctx.agent_id)  # fmt: skip
        except Exception:
            log.warning("writing compressed-away messages to memory failed", exc_info=True)

    def _failed(self, ctx: ToolContext, size: int, reason: str, exc: Exception) -> None:
        log.warning("compression (%s) failed for %s: %s", reason, ctx.agent_id, exc)
        emit(
            ctx.events,
            COMPRESSED,
            ctx.agent_id,
            before_tokens=size,
            after_tokens=size,
            removed_messages=0,
            trimmed_results=0,
            reason=reason,
            ok=False,
            error=f"{type(exc).__name__}: {exc}",
        )


# -- pure helpers (no I/O; tested directly) -----------------------------------------------


def _extends(messages: Sequence[Message], sent: _Sent) -> bool:
    """Whether ``messages`` still starts with what was sent (only appended to since)."""
    return 0 < sent.count <= len(messages) and messages[sent.count - 1] is sent.last


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary an earlier compression put in."""
    return isinstance(message, UserMessage) and message.content.startswith(SUMMARY_PREFIX)


def _head_length(messages: Sequence[Message]) -> int:
    n = 0
    while n < len(messages) and isinstance(messages[n], SystemMessage):
        n += 1
    return n


def _unsafe_cuts(body: Sequence[Message]) -> list[bool]:
    """``bad[i]``: cutting before ``body[i]`` would separate a tool call from its result."""
    n = len(body)
    issued: dict[str, int] = {}
    delta = [0] * (n + 2)
    for i, m in enumerate(body):
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                issued[call.id] = i
        elif isinstance(m, ToolResultMessage):
            a = issued.get(m.tool_call_id)
            if a is not None and a < i:
                delta[a + 1] += 1
                delta[i + 1] -= 1
    bad, running = [], 0
    for i in range(n):
        running += delta[i]
        bad.append(running > 0 or isinstance(body[i], ToolResultMessage))
    return bad


def choose_cut(body: Sequence[Message], keep_tokens: int) -> int | None:
    """Where the kept tail of ``body`` (the messages after the system prompt) begins.

    The earliest safe cut whose tail fits ``keep_tokens``, else the latest safe cut (the
    smallest tail that keeps the newest message); None when there is no safe cut with
    something worth summarising before it. A cut is safe when the tail does not start with a
    tool result and no tool call is separated from its result.
    """
    bad = _unsafe_cuts(body)
    sizes = [estimate_tokens([m]) for m in body]
    suffix, total = [0] * (len(body) + 1), 0
    for i in range(len(body) - 1, -1, -1):
        total += sizes[i]
        suffix[i] = total
    safe = [i for i in range(1, len(body)) if not bad[i]]
    safe = [i for i in safe if not all(is_summary(m) for m in body[:i])]
    if not safe:
        return None
    fitting = [i for i in safe if suffix[i] <= keep_tokens]
    return fitting[0] if fitting else safe[-1]


def trim_tool_results(
    tail: Sequence[Message], over_tokens: int, *, newest_too: bool = False
) -> tuple[list[Message], int]:
    """Trim tool results bigger than ``over_tokens`` in ``tail``, with a marker.

    The newest batch of results (those after the last assistant message, which the model has
    not read yet) is left whole unless ``newest_too``. Returns the new tail and the count.
    """
    last_assistant = max(
        (i for i, m in enumerate(tail) if isinstance(m, AssistantMessage)), default=-1
    )
    keep_chars = over_tokens * 2  # half the limit, at about four characters a token
    out: list[Message] = []
    trimmed = 0
    for i, m in enumerate(tail):
        protected = i > last_assistant and not newest_too
        if (
            isinstance(m, ToolResultMessage)
            and not protected
            and estimate_text_tokens(m.content) > over_tokens
        ):
            marker = TRIM_MARKER.format(n=len(m.content) - keep_chars)
            content = f"{m.content[:keep_chars]}\n{marker}"
            m = ToolResultMessage(m.tool_call_id, m.name, content, m.is_error)
            trimmed += 1
        out.append(m)
    return out, trimmed


def drop_settled_reasoning(tail: Sequence[Message]) -> list[Message]:
    """``tail`` with the reasoning parts of its finished turns (those before its last user
    message) left out; the turn in progress keeps them (see the module)."""
    last_user = max((i for i, m in enumerate(tail) if isinstance(m, UserMessage)), default=-1)
    return [
        replace(m, reasoning=())
        if isinstance(m, AssistantMessage) and m.reasoning and i < last_user
        else m
        for i, m in enumerate(tail)
    ]


def render_transcript(messages: Sequence[Message], max_tokens: int) -> str:
    """The older messages as plain text for the summary call, at most ``max_tokens``.

    Each message is capped; if the whole is still too long, the oldest messages after the
    first (which may be an earlier summary) give way to a marker.
    """
    per_message = max(max_tokens // 4, 200) * 4  # characters
    blocks = [_render(m, per_message) for m in messages]
    cost = [estimate_text_tokens(b) + 1 for b in blocks]
    if sum(cost) <= max_tokens or len(blocks) < 2:
        return "\n\n".join(blocks)[: max_tokens * 4]
    kept: list[str] = []
    room = max_tokens - cost[0] - 20
    for block, c in zip(reversed(blocks[1:]), reversed(cost[1:]), strict=True):
        if c > room:
            break
        kept.append(block)
        room -= c
    omitted = len(blocks) - 1 - len(kept)
    return "\n\n".join([blocks[0], f"[... {omitted} messages omitted ...]", *reversed(kept)])


def _render(m: Message, limit: int) -> str:
    def cap(text: str) -> str:
        return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more]"

    if isinstance(m, AssistantMessage):
        parts = [f"[assistant] {cap(m.content)}"] if m.content else []
        parts += [f"[assistant calls {c.name} ({c.id})] {cap(c.arguments)}" for c in m.tool_calls]
        return "\n".join(parts) or "[assistant] (empty)"
    if isinstance(m, ToolResultMessage):
        flag = ", error" if m.is_error else ""
        return f"[result of {m.name} ({m.tool_call_id}){flag}] {cap(m.content)}"
    return f"[{m.role}] {cap(m.content)}"
