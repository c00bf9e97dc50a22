"""The one interface every model provider implements.

A provider adapter turns a list of :mod:`retinue.messages` plus tool specs into one wire
request and the provider's answer back into an :class:`AssistantMessage` with
:class:`Usage`. Streaming is optional per call: pass ``on_text`` and text deltas are delivered
as they arrive; the return value is the same complete :class:`ModelResponse` either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from retinue.messages import AssistantMessage, Message, Usage

__all__ = ["Model", "ModelResponse", "TextCallback", "ToolSpec"]

TextCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about one tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One answer. ``model`` names the model that gave it when that is not the one asked
    (a fallback, :mod:`retinue.llm.fallback`), then ``fallback_from`` names the one asked."""

    message: AssistantMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    fallback_from: str = ""


@runtime_checkable
class Model(Protocol):
    """A chat model. ``name`` is the full ``provider:model`` string."""

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        """Send one request; raise :class:`~retinue.errors.ModelError` on failure."""
        ...
