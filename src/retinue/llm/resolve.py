"""Turn a model string such as ``openai:gpt-4o-mini`` into a :class:`Model`.

Provider modules are imported lazily so that ``import retinue`` and ``retinue --help`` stay
fast and an optional provider's missing extra only matters when it is asked for.
"""

from __future__ import annotations

from retinue.config import canonical_model
from retinue.errors import ConfigError
from retinue.llm.base import Model

__all__ = ["PROVIDERS", "resolve_model"]

PROVIDERS = ("openai", "anthropic", "gemini", "local")


def resolve_model(spec: str) -> Model:
    """Build the model named by ``spec`` (``provider:model``, or a model id or alias that
    :func:`~retinue.config.canonical_model` accepts); raise :class:`ConfigError` if wrong."""
    spec = canonical_model(spec, where="--model or RETINUE_MODEL")
    provider, _, name = spec.partition(":")
    if provider == "openai":  # Responses on api.openai.com, Chat Completions elsewhere
        from retinue.llm.openai_responses import openai_model

        return openai_model(name)
    if provider == "anthropic":
        from retinue.llm.anthropic import AnthropicModel

        return AnthropicModel(name)
    if provider == "gemini":  # Gemini API, or Vertex AI with GOOGLE_GENAI_USE_VERTEXAI
        from retinue.llm.gemini import GeminiModel

        return GeminiModel(name)
    if provider == "local":
        from retinue.llm.local import LocalModel

        return LocalModel(name)
    raise ConfigError(
        f"unknown model provider {provider!r} in {spec!r}; "
        f"known providers: {', '.join(PROVIDERS)} (set --model or RETINUE_MODEL)"
    )
