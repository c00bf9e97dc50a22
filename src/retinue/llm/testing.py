"""``ScriptedModel``: the one fake model every test and benchmark uses.

It replays a queue of scripted steps, records every request it receives, and fails loudly on
a call nobody scripted. A step is one of:

* a ``str`` — a plain text answer;
* an :class:`AssistantMessage` (see :func:`call_tool` / :func:`call_tools`) or a
  :class:`ModelResponse` (to script usage figures);
* an exception instance — raised from ``complete`` (e.g. ``ContextTooLongError``);
* a callable ``(messages, tools) -> step`` — computes the answer from the request.

``ScriptedModel(responder=fn)`` answers every call with ``fn`` instead of a queue. ``delay``
adds simulated latency (an ``asyncio.sleep``) before each answer.

What a test checks afterwards:

* ``model.calls`` — every request, oldest first, as a :class:`ModelCall`: ``.messages`` (the
  whole history the model was sent, system prompt first) and ``.tools`` (the
  :class:`~retinue.llm.base.ToolSpec` objects offered), with ``.tool_names`` for short.
  Sub-agents that run on the same model object add their requests to the same list.
  ``record=False`` keeps nothing (for benchmarks);
* ``model.call_count`` — how many requests came (recorded or not);
* ``model.remaining`` and ``model.assert_done()`` — scripted steps not used yet (raises
  :class:`~retinue.errors.ScriptError` if any).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from retinue.errors import ScriptError
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.tokens import estimate_text_tokens, estimate_tokens
from retinue.messages import AssistantMessage, Message, ToolCall, Usage

__all__ = ["ModelCall", "ScriptedModel", "Step", "call_tool", "call_tools"]

Step: TypeAlias = (
    str
    | AssistantMessage
    | ModelResponse
    | BaseException
    | Callable[[Sequence[Message], Sequence[ToolSpec]], Any]
)

_ids = itertools.count(1)


def call_tool(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str = ""
) -> AssistantMessage:
    """An assistant message asking for one tool call (``arguments`` as a dict or raw JSON)."""
    return call_tools((name, arguments or {}, id))


def call_tools(
    *calls: tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str],
) -> AssistantMessage:
    """An assistant message asking for several tool calls at once: ``(name, args[, id])``."""
    out = []
    for call in calls:
        name, args = call[0], call[1]
        call_id = (call[2] if len(call) > 2 else "") or f"call_{next(_ids)}"  # type: ignore[misc]
        raw = args if isinstance(args, str) else json.dumps(args)
        out.append(ToolCall(call_id, name, raw))
    return AssistantMessage("", tuple(out))


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One recorded request: the messages and tool specs exactly as the model received them."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


class ScriptedModel:
    """A deterministic in-process model driven by a script (see the module docstring).

    ``calls`` is the list of recorded requests (:class:`ModelCall`: ``messages``, ``tools``,
    ``tool_names``), ``call_count`` their number."""

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        responder: Callable[[Sequence[Message], Sequence[ToolSpec]], Any] | None = None,
        name: str = "scripted:model",
        delay: float = 0.0,
        record: bool = True,
    ) -> None:
        self._steps: deque[Step] = deque(steps)
        self._responder = responder
        self._name = name
        self.delay = delay
        self.record = record
        self.calls: list[ModelCall] = []
        self.call_count = 0

    @property
    def name(self) -> str:
        return self._name

    def add(self, *steps: Step) -> ScriptedModel:
        self._steps.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        return len(self._steps)

    def assert_done(self) -> None:
        """Raise :class:`ScriptError` if scripted steps were never consumed."""
        if self._steps:
            raise ScriptError(f"{self._name}: {len(self._steps)} scripted step(s) never used")

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        self.call_count += 1
        if self.record:
            self.calls.append(ModelCall(tuple(messages), tuple(tools)))
        if self._responder is not None:
            step: Any = self._responder
        elif self._steps:
            step = self._steps.popleft()  # taken at call time: a cancelled call uses its step
        else:
            last = messages[-1].content[:200] if messages else ""
            raise ScriptError(
                f"{self._name}: unscripted call #{self.call_count} (last message: {last!r})"
            )
        if self.delay:
            await asyncio.sleep(self.delay)
        response = self._resolve(step, messages, tools)
        if on_text and response.message.content:
            on_text(response.message.content)
        return response

    def _resolve(
        self, step: Any, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        if callable(step) and not isinstance(step, BaseException | type):
            step = step(messages, tools)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step
        if isinstance(step, str):
            step = AssistantMessage(step)
        if not isinstance(step, AssistantMessage):
            raise ScriptError(
                f"{self._name}: a step must be str, AssistantMessage, ModelResponse, "
                f"exception or callable, not {type(step).__name__}"
            )
        out_tokens = estimate_text_tokens(step.content) + sum(
            estimate_text_tokens(t.arguments) for t in step.tool_calls
        )
        usage = Usage(estimate_tokens(messages), out_tokens, 0, 1)
        return ModelResponse(step, usage, "tool_calls" if step.tool_calls else "stop")
