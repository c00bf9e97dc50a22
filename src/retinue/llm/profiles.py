"""Context budgets per model: how big a request may get before it must be compressed.

A :class:`ModelProfile` holds a model's context window and the part of it kept free for the
answer (``output_reserve``). :func:`profile_for` picks one for a ``provider:model`` string
from the known model families, falling back to a conservative default; a mapping of
overrides (by full name, bare name, or name prefix) wins over the built-in table, so a
deployment can describe its own endpoints (an Ollama server with a small ``num_ctx``, a
fine-tuned model) without code.

A profile also says how the embedded model is asked for tool calls (``tool_format``, one of
:data:`TOOL_FORMATS`): the two-step design tuned on the 0.5B model (``"steps"``) or the model's
own chat-template tool section and ``<tool_call>`` output (``"native"``); each known embedded
model has the format its task-suite measurement chose (``benchmarks/agent_tasks.py``).

The figures are the providers' published limits as of 2025, rounded down where a family
spans several sizes; they only steer compression, the provider's own refusal
(:class:`~retinue.errors.ContextTooLongError`) remains the last word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from retinue.errors import ConfigError

__all__ = ["DEFAULT_PROFILE", "NATIVE", "STEPS", "TOOL_FORMATS", "ModelProfile", "profile_for"]

STEPS = "steps"
"""Tools asked for in two short constrained steps: one word naming the step (``answer`` or a
tool), then that tool's arguments (:mod:`retinue.llm._local_engine`)."""
NATIVE = "native"
"""Tools in the chat template's own tool section; free text until the model opens a
``<tool_call>``, then only the call's name and arguments are constrained."""
TOOL_FORMATS = (STEPS, NATIVE)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A model's context window, the tokens kept free for its answer, whether it is small, and
    how an embedded model is asked for tool calls."""

    context_window: int
    output_reserve: int = 4_096
    compact: bool = False
    """A small model: the main agent gets a short prompt and fewer tools
    (:mod:`retinue.engine.compact`)."""
    tool_format: str = STEPS
    """How the embedded (``local:``) model is prompted for tool calls: one of
    :data:`TOOL_FORMATS`. Other providers take tools through their API and ignore it."""

    def __post_init__(self) -> None:
        if self.tool_format not in TOOL_FORMATS:
            raise ConfigError(
                f"tool_format must be one of {', '.join(TOOL_FORMATS)}, not {self.tool_format!r}"
            )
        if self.context_window <= 0:
            raise ConfigError(f"context_window must be positive, not {self.context_window}")
        if not 0 <= self.output_reserve < self.context_window:
            raise ConfigError(
                f"output_reserve must be at least 0 and below context_window "
                f"({self.context_window}), not {self.output_reserve}"
            )

    @property
    def input_budget(self) -> int:
        """Tokens a request may use: the window minus the output reserve."""
        return self.context_window - self.output_reserve


DEFAULT_PROFILE = ModelProfile(32_768, 4_096)
"""For a model nobody described: small enough to compress early rather than overflow."""

_LOCAL = ModelProfile(8_192, 1_024, compact=True)  # the embedded llama.cpp model's usual n_ctx
_LOCAL_MODELS = {  # each embedded model with the tool format its task-suite run chose
    "qwen2.5-coder-0.5b": _LOCAL,
    "qwen2.5-coder-1.5b": ModelProfile(8_192, 1_024, compact=True, tool_format=NATIVE),
}
_SCRIPTED = ModelProfile(32_768, 2_048)  # the test model; tests pass their own window
_CLAUDE = ModelProfile(200_000, 16_384)
_GEMINI = ModelProfile(1_048_576, 65_536)

# (pattern searched in the lower-cased bare model name, profile); first match wins, so the
# more specific patterns come first. ``(?<![a-z0-9])`` keeps "o3" from matching inside a word.
_FAMILIES: tuple[tuple[re.Pattern[str], ModelProfile], ...] = tuple(
    (re.compile(p), prof)
    for p, prof in (
        (r"(?<![a-z0-9])gpt-5", ModelProfile(400_000, 128_000)),
        (r"(?<![a-z0-9])gpt-4\.1", ModelProfile(1_047_576, 32_768)),
        (r"(?<![a-z0-9])gpt-4o", ModelProfile(128_000, 16_384)),
        (r"(?<![a-z0-9])gpt-4-(turbo|\d{4}-preview)", ModelProfile(128_000, 4_096)),
        (r"(?<![a-z0-9])gpt-4(?![a-z0-9.])", ModelProfile(8_192, 2_048)),
        (r"(?<![a-z0-9])gpt-3\.5", ModelProfile(16_385, 4_096)),
        (r"(?<![a-z0-9])o1-mini", ModelProfile(128_000, 65_536)),
        (r"(?<![a-z0-9])o[1-9](?![0-9])", ModelProfile(200_000, 100_000)),
        # "a 1M token context window (default and maximum) and 128k max output tokens"
        # (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2)
        (r"claude-(fable|mythos)-5", ModelProfile(1_000_000, 128_000)),
        (r"claude", _CLAUDE),
        # Gemini 2.5 and 3: 1,048,576 input tokens, 65,536 output (ai.google.dev/gemini-api/
        # docs/models)
        (r"gemini-(2\.5|[3-9])", _GEMINI),
        (r"deepseek-(reasoner|r1)", ModelProfile(128_000, 32_768)),
        (r"deepseek", ModelProfile(128_000, 8_192)),
        (r"qwen", ModelProfile(32_768, 4_096)),
        (r"llama-?(3\.[1-9]|4)|llama-v3p[1-9]", ModelProfile(131_072, 4_096)),
        (r"llama", ModelProfile(8_192, 1_024)),
    )
)

_PROVIDER_DEFAULTS = {
    "local": _LOCAL,
    "scripted": _SCRIPTED,
    "anthropic": _CLAUDE,
    "gemini": _GEMINI,
}


def profile_for(
    model_name: str, overrides: Mapping[str, ModelProfile] | None = None
) -> ModelProfile:
    """The profile for ``model_name`` (``provider:model``, or a bare model name).

    Order: an override for the full name, then for the bare name, then the longest override
    key that is a prefix of either; then the embedded ``local:`` and ``scripted:`` providers;
    then the known families; then the provider's default; then :data:`DEFAULT_PROFILE`.
    An embedded model known by name (``local:qwen2.5-coder-1.5b``) has a profile of its own.
    """
    provider, sep, bare = model_name.partition(":")
    if not sep:
        provider, bare = "", model_name
    if overrides:
        found = _override(overrides, model_name, bare)
        if found is not None:
            return found
    if provider == "local":
        return _LOCAL_MODELS.get(bare, _LOCAL)
    if provider == "scripted":
        return _SCRIPTED
    lowered = bare.lower()
    for pattern, profile in _FAMILIES:
        if pattern.search(lowered):
            return profile
    return _PROVIDER_DEFAULTS.get(provider, DEFAULT_PROFILE)


def _override(overrides: Mapping[str, ModelProfile], full: str, bare: str) -> ModelProfile | None:
    for key in (full, bare):
        if key in overrides:
            return overrides[key]
    prefixes = [k for k in overrides if full.startswith(k) or bare.startswith(k)]
    return overrides[max(prefixes, key=len)] if prefixes else None
