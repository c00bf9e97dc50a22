"""Context editing: clear old tool results and old thinking before summarising anything.

The first, cheap stage of :class:`~retinue.engine.compress.AutoCompressor`. When a request
passes :attr:`ContextEdit.trigger` of the model's input budget, :func:`clear_context`
replaces the content of every tool result but the newest ``keep_tool_results`` by a short
stub that names the tool and how to get the content back (repeat the call where that is
safe; a sub-agent's answer is in its transcript), and leaves out the reasoning parts of
finished turns. The tool calls stay, every result keeps its ``tool_call_id``, so call/result
pairing is never broken; the results the model has not read yet, and the reasoning parts of
the turn in progress (which Anthropic's thinking blocks, OpenAI's reasoning items and
Gemini's thought signatures need back: see :mod:`retinue.llm._anthropic_wire`), are never
touched. A clearing that would free less than ``clear_at_least`` of the budget is not made:
every clearing rewrites the history after the first cleared result, so it costs the
provider's prompt cache from there on, and it must buy enough room to be worth that
(Anthropic's ``clear_at_least`` in its server-side ``clear_tool_uses_20250919`` edit has the
same reason: https://platform.claude.com/docs/en/build-with-claude/context-editing). It
costs no model call; only when the request is still past the summary threshold afterwards
does the summarising compression run.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from retinue.errors import ConfigError
from retinue.llm.tokens import estimate_tokens
from retinue.messages import AssistantMessage, Message, ToolResultMessage

__all__ = [
    "CLEARED_PREFIX",
    "ContextEdit",
    "EditResult",
    "clear_context",
    "configured_edit",
    "is_cleared",
]

CLEARED_PREFIX = "[Old tool result cleared to save context"
_STUB = CLEARED_PREFIX + " ({n} characters). {how}]"
_AGAIN = "If you need it again, repeat the {name} call (where repeating it is safe)."
_RECOVER = {
    "SubAgent": "The sub-agent's answer is in its transcript (ReadTranscript, when offered).",
}
_MIN_CLEAR_CHARS = 400  # a result this short is kept: its stub would free next to nothing


@dataclass(frozen=True, slots=True)
class ContextEdit:
    """When and what the first stage clears (see the module).

    ``trigger``: clear when a request passes this share of the input budget.
    ``keep_tool_results``: the newest tool results kept whole. ``clear_at_least``: the share
    of the budget one clearing must free, or nothing is cleared. ``clear_thinking``: leave out
    the reasoning parts of finished turns too. ``exclude_tools``: tools whose results are
    never cleared.
    """

    trigger: float = 0.6
    keep_tool_results: int = 3
    clear_at_least: float = 0.2
    clear_thinking: bool = True
    exclude_tools: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not 0 < self.trigger <= 1:
            raise ConfigError(f"context edit trigger must be in (0, 1], not {self.trigger}")
        if self.keep_tool_results < 0:
            raise ConfigError("context edit keep_tool_results must be at least 0")
        if not 0 <= self.clear_at_least < 1:
            raise ConfigError("context edit clear_at_least must be in [0, 1)")


def configured_edit(trigger: float, keep_tool_results: int) -> ContextEdit | None:
    """The first stage as ``config.toml`` sets it (``context_edit_trigger``, ``0`` turns it
    off, and ``context_edit_keep``)."""
    return ContextEdit(trigger, keep_tool_results) if trigger > 0 else None


@dataclass(frozen=True, slots=True)
class EditResult:
    """What one clearing did: results and reasoning parts cleared, tokens freed (estimated)."""

    cleared_results: int
    cleared_reasoning: int
    freed_tokens: int


def is_cleared(message: Message) -> bool:
    """Whether ``message`` is a tool result an earlier clearing replaced by its stub."""
    return isinstance(message, ToolResultMessage) and message.content.startswith(CLEARED_PREFIX)


def clear_context(
    messages: Sequence[Message],
    *,
    keep_tool_results: int = 3,
    clear_thinking: bool = True,
    exclude_tools: Collection[str] = (),
) -> tuple[list[Message], EditResult]:
    """``messages`` with old tool results stubbed and settled reasoning left out.

    Pure: the input is not changed. Results after the last assistant message (not read yet)
    and the newest ``keep_tool_results`` results are kept whole; so are results of
    ``exclude_tools``, results already cleared and results too short to be worth it.
    """
    unread = _last_assistant(messages) + 1
    results = [i for i, m in enumerate(messages[:unread]) if isinstance(m, ToolResultMessage)]
    kept = set(results[max(len(results) - keep_tool_results, 0) :])
    settled = _settled_end(messages) if clear_thinking else 0
    out: list[Message] = []
    cleared = reasoning = 0
    for i, m in enumerate(messages):
        if isinstance(m, ToolResultMessage) and i < unread and i not in kept:
            if _clearable(m, exclude_tools):
                m = _stub(m)
                cleared += 1
        elif isinstance(m, AssistantMessage) and m.reasoning and i < settled:
            reasoning += len(m.reasoning)
            m = replace(m, reasoning=())
        out.append(m)
    freed = max(estimate_tokens(messages) - estimate_tokens(out), 0)
    return out, EditResult(cleared, reasoning, freed)


def _last_assistant(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)


def _settled_end(messages: Sequence[Message]) -> int:
    """The index after the last finished turn: after the newest assistant answer without tool
    calls. What follows is the turn in progress, whose reasoning the provider needs back with
    its tool calls (a steering message in the middle of a tool loop does not end it)."""
    return next(
        (
            i + 1
            for i in range(len(messages) - 1, -1, -1)
            if isinstance(m := messages[i], AssistantMessage) and not m.tool_calls
        ),
        0,
    )


def _clearable(m: ToolResultMessage, exclude_tools: Collection[str]) -> bool:
    if m.name in exclude_tools or is_cleared(m):
        return False
    return len(m.content) >= _MIN_CLEAR_CHARS or bool(m.parts)


def _stub(m: ToolResultMessage) -> ToolResultMessage:
    how = _RECOVER.get(m.name) or _AGAIN.format(name=m.name or "the tool")
    size = len(m.content) + sum(4 * p.token_estimate for p in m.parts)
    return ToolResultMessage(m.tool_call_id, m.name, _STUB.format(n=size, how=how), m.is_error)
