"""Fallback models: another model takes over a request the first could not serve.

:class:`FallbackModel` sends each request to its primary model; when that fails with an
overload or a server error (HTTP 5xx, Anthropic's 529 included) after the provider's own
retries, the next fallback model gets the same request, and so on. The answer says which
model gave it (``ModelResponse.model``, ``fallback_from``), so the run loop's
``model_called`` event shows the fallback, and a warning is logged.

Nothing else hands over: a refusal (:class:`~retinue.errors.ModelRefusal`) is the model's
answer and is reported as one, a request too long or a key refused would fail the same way
elsewhere. Reasoning parts made by the primary are not sent to a fallback of another model
(each adapter keeps only what its model can read; :mod:`retinue.llm._anthropic_wire`).

``ModelSettings.fallback_models`` names them; :func:`with_fallbacks` builds the wrapper.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from retinue.errors import ModelError, ModelRefusal
from retinue.llm.base import Model, ModelResponse, TextCallback, ToolSpec
from retinue.messages import Message

__all__ = ["FallbackModel", "hands_over", "with_fallbacks"]

log = logging.getLogger("retinue.llm")


def hands_over(exc: ModelError) -> bool:
    """Whether a failure lets the next model try: an overload or a server error."""
    if isinstance(exc, ModelRefusal):
        return False
    return exc.status_code is not None and exc.status_code >= 500


class FallbackModel:
    """``primary``, with ``fallbacks`` taking over its overloads and server errors."""

    def __init__(self, primary: Model, fallbacks: Sequence[Model]) -> None:
        self.primary = primary
        self.fallbacks = tuple(fallbacks)

    @property
    def name(self) -> str:
        return self.primary.name

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        models = (self.primary, *self.fallbacks)
        for i, model in enumerate(models):
            try:
                response = await model.complete(messages, tools, on_text=on_text)
            except ModelError as exc:
                if i + 1 == len(models) or not hands_over(exc):
                    raise
                log.warning("%s failed (%s); %s takes over", model.name, exc, models[i + 1].name)
                continue
            if i == 0:
                return response
            return replace(response, model=model.name, fallback_from=self.primary.name)
        raise AssertionError("unreachable: the last model's failure is raised")

    async def aclose(self) -> None:
        for model in (self.primary, *self.fallbacks):
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


def with_fallbacks(model: Model, names: Sequence[str], model_for: Callable[[str], Model]) -> Model:
    """``model`` with the models ``names`` name (built by ``model_for``) as its fallbacks;
    ``model`` itself when there are none."""
    if not names:
        return model
    return FallbackModel(model, [model_for(name) for name in names])
