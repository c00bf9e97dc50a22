"""Model providers behind one :class:`Model` protocol, chosen by a ``provider:model`` string."""

from retinue.llm.base import Model, ModelResponse, TextCallback, ToolSpec
from retinue.llm.resolve import resolve_model

__all__ = ["Model", "ModelResponse", "TextCallback", "ToolSpec", "resolve_model"]
