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

A profile is also the model catalogue the adapters read: the most output tokens
(``max_output``) and capability flags: whether the model reasons (``reasoning``), how its
thinking is asked for (``thinking``, one of :data:`THINKING_KINDS`), whether it reads images
(``vision``) and PDF documents (``pdf``), and whether it takes a JSON schema for its answer
(``structured_output``). Current models are listed by name (:data:`CATALOGUE`, a dated id
such as ``claude-opus-5-5-20260922`` counts as its name); others fall back to their family.

The figures are the providers' published limits (sources cited per family, read 2026-12);
they steer compression and the settings an adapter sends, the provider's own refusal
(:class:`~retinue.errors.ContextTooLongError`) remains the last word. A figure no source gave
is left out (``max_output=None``) rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from retinue._deprecated import warn_renamed
from retinue.errors import ConfigError

__all__ = [
    "ADAPTIVE",
    "ALWAYS",
    "BUDGET",
    "CATALOGUE",
    "DEFAULT_PROFILE",
    "EFFORT",
    "LEVEL",
    "NATIVE",
    "NO_THINKING",
    "STEPS",
    "THINKING_KINDS",
    "TOOL_FORMATS",
    "ModelProfile",
    "profile_for",
]

STEPS = "steps"
"""Tools asked for in two short constrained steps: one word naming the step (``answer`` or a
tool), then that tool's arguments (:mod:`retinue.llm._local_engine`)."""
NATIVE = "native"
"""Tools in the chat template's own tool section; free text until the model opens a
``<tool_call>``, then only the call's name and arguments are constrained."""
TOOL_FORMATS = (STEPS, NATIVE)

NO_THINKING = "none"
"""No thinking setting to send."""
BUDGET = "budget"
"""Thinking asked for with a token budget (Claude's extended thinking before 4.6; Gemini 2.5's
``thinking_budget``)."""
ADAPTIVE = "adaptive"
"""Claude's adaptive thinking (``thinking: {type: "adaptive"}``), with ``effort``."""
ALWAYS = "always"
"""Adaptive thinking that cannot be turned off: ``disabled`` or a manual budget is a 400."""
LEVEL = "level"
"""Gemini 3's ``thinking_level`` (a level and a budget together are a 400)."""
EFFORT = "effort"
"""OpenAI's ``reasoning.effort`` (sampling settings are refused while it reasons)."""
THINKING_KINDS = (NO_THINKING, BUDGET, ADAPTIVE, ALWAYS, LEVEL, EFFORT)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A model's context window, the tokens kept free for its answer, whether it is small, and
    how an embedded model is asked for tool calls."""

    context_window: int
    output_reserve: int = 4_096
    small_model_prompt: bool = False
    """A small model: the main agent gets a short prompt and fewer tools
    (:mod:`retinue.engine.small_model_prompt`). Its old name ``compact`` is deprecated (read
    as a property for one release; not *compaction*, which Retinue calls compressing)."""
    tool_format: str = STEPS
    """How the embedded (``local:``) model is prompted for tool calls: one of
    :data:`TOOL_FORMATS`. Other providers take tools through their API and ignore it."""
    max_output: int | None = None
    """The most tokens one answer may have (thinking included), when a source gave it."""
    thinking: str = NO_THINKING
    """How the model's thinking is asked for: one of :data:`THINKING_KINDS`."""
    vision: bool = False
    """Reads images."""
    pdf: bool = False
    """Reads PDF documents."""
    structured_output: bool = False
    """Takes a JSON schema its answer must follow."""

    @property
    def compact(self) -> bool:
        """Deprecated: :attr:`small_model_prompt`."""
        warn_renamed("ModelProfile.compact", "ModelProfile.small_model_prompt")
        return self.small_model_prompt

    @property
    def reasoning(self) -> bool:
        """Whether the model reasons (thinks) before it answers, in whatever form."""
        return self.thinking != NO_THINKING

    def __post_init__(self) -> None:
        if self.thinking not in THINKING_KINDS:
            raise ConfigError(
                f"thinking must be one of {', '.join(THINKING_KINDS)}, not {self.thinking!r}"
            )
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

# the embedded llama.cpp model's usual n_ctx
_LOCAL = ModelProfile(8_192, 1_024, small_model_prompt=True)
_LOCAL_MODELS = {  # each embedded model with the tool format its task-suite run chose
    "qwen2.5-coder-0.5b": _LOCAL,
    "qwen2.5-coder-1.5b": ModelProfile(8_192, 1_024, small_model_prompt=True, tool_format=NATIVE),
}
_SCRIPTED = ModelProfile(32_768, 2_048)  # the test model; tests pass their own window


def _current(window: int, out: int, thinking: str, *, pdf: bool = True) -> ModelProfile:
    """A current hosted model: reads images (and PDFs), takes a JSON schema; ``out`` tokens
    are both its output limit and the part of the window kept free for the answer."""
    return ModelProfile(
        window, out, max_output=out, thinking=thinking, vision=True, pdf=pdf,
        structured_output=True,
    )  # fmt: skip


# Anthropic: each model's overview page, platform.claude.com/docs/en/models/<model>/overview
# ("Context window 1M tokens, Max output 128K tokens", "Thinking: Adaptive (always on)" for
# Fable 5.x and Opus 5.5, "Adaptive" for Opus 5, Sonnet 5 / 5.5 and Haiku 5.5); Haiku 4.5:
# 200K / 64K, extended (budget) thinking (models overview, "Compare models").
_CLAUDE_ALWAYS = _current(1_000_000, 128_000, ALWAYS)
_CLAUDE_5 = _current(1_000_000, 128_000, ADAPTIVE)
_CLAUDE = ModelProfile(200_000, 16_384)
# OpenAI: developers.openai.com/api/docs/models (GPT-6 Astra and the GPT-5.6 family: "Context
# window 1.05M, Max output 128K tokens", reasoning effort none..max); GPT-6 Sol / Luna, 6.1 and
# 6.2 keep "a 1,050,000-token context window ... 128K output" (OpenAI's announcements as
# docs.litellm.ai/blog/gpt_6_sol_luna and docs.laozhang.ai's GPT-6.2 page quote them);
# GPT-5.4 / 5.5: 1M (the pricing page's table as www.morphllm.com/openai-api-pricing quotes
# it, no output limit given); GPT-5.2: 400K / 128K, as every GPT-5 model page gives it
# (developers.openai.com/api/docs/models/gpt-5-nano, .../gpt-5-codex; 5.2's own page not found).
_GPT_6 = _current(1_050_000, 128_000, EFFORT)
_GPT_1M = ModelProfile(1_000_000, 128_000, thinking=EFFORT, vision=True, structured_output=True)
# Google: ai.google.dev/gemini-api/docs/models/<model> ("Input token limit 1,048,576, Output
# token limit 65,536"; text, image, video, audio and PDF input; structured outputs; thinking).
_GEMINI = _current(1_048_576, 65_536, LEVEL)
_GEMINI_25 = _current(1_048_576, 65_536, BUDGET)

CATALOGUE: Mapping[str, ModelProfile] = {
    **dict.fromkeys(
        (
            "claude-fable-5", "claude-fable-5-1", "claude-fable-5-2",
            "claude-mythos-5", "claude-mythos-5-1", "claude-mythos-5-2", "claude-opus-5-5",
        ),
        _CLAUDE_ALWAYS,
    ),
    **dict.fromkeys(
        ("claude-opus-5", "claude-sonnet-5", "claude-sonnet-5-5", "claude-haiku-5-5"), _CLAUDE_5
    ),
    "claude-haiku-4-5": _current(200_000, 64_000, BUDGET),
    **dict.fromkeys(
        (
            "gpt-6-astra", "gpt-6-sol", "gpt-6-luna", "gpt-6.1-sol", "gpt-6.1-terra",
            "gpt-6.2-astra", "gpt-6.2-sol",
            "gpt-5.6", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna",
        ),
        _GPT_6,
    ),
    **dict.fromkeys(("gpt-5.5", "gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano"), _GPT_1M),
    "gpt-5.2": _current(400_000, 128_000, EFFORT),
    **dict.fromkeys(
        (
            "gemini-3-pro", "gemini-3-pro-preview", "gemini-3.1-pro-preview",
            "gemini-3-flash", "gemini-3-flash-preview", "gemini-3.5-flash", "gemini-3.6-flash",
            "gemini-3.8-flash",
        ),
        _GEMINI,
    ),
    **dict.fromkeys(("gemini-2.5-pro", "gemini-2.5-flash"), _GEMINI_25),
}  # fmt: skip
"""Current models by bare, lower-cased name (a trailing ``-YYYYMMDD`` date is ignored)."""

# (pattern searched in the lower-cased bare model name, profile); first match wins, so the
# more specific patterns come first. ``(?<![a-z0-9])`` keeps "o3" from matching inside a word.
_FAMILIES: tuple[tuple[re.Pattern[str], ModelProfile], ...] = tuple(
    (re.compile(p), prof)
    for p, prof in (
        (r"(?<![a-z0-9])gpt-([6-9]|\d\d)", _GPT_6),
        (r"(?<![a-z0-9])gpt-5", ModelProfile(400_000, 128_000, thinking=EFFORT)),
        (r"(?<![a-z0-9])gpt-4\.1", ModelProfile(1_047_576, 32_768)),
        (r"(?<![a-z0-9])gpt-4o", ModelProfile(128_000, 16_384)),
        (r"(?<![a-z0-9])gpt-4-(turbo|\d{4}-preview)", ModelProfile(128_000, 4_096)),
        (r"(?<![a-z0-9])gpt-4(?![a-z0-9.])", ModelProfile(8_192, 2_048)),
        (r"(?<![a-z0-9])gpt-3\.5", ModelProfile(16_385, 4_096)),
        (r"(?<![a-z0-9])o1-mini", ModelProfile(128_000, 65_536, thinking=EFFORT)),
        (r"(?<![a-z0-9])o[1-9](?![0-9])", ModelProfile(200_000, 100_000, thinking=EFFORT)),
        (r"^codex", ModelProfile(200_000, 100_000, thinking=EFFORT)),
        # Claude Fable and Mythos 5.x always think; every Claude 5 model has adaptive thinking,
        # as Opus and Sonnet 4.6 and later do (adaptive-thinking page, "supported models");
        # Claude 4 and 3.7 think with a manual budget; older models do not think.
        (r"claude-(fable|mythos)-([5-9]|\d\d)", _CLAUDE_ALWAYS),
        (r"claude-(opus|sonnet|haiku)-([5-9]|\d\d)", _CLAUDE_5),
        (
            r"claude-(opus|sonnet)-4-([6-9]|\d\d)(?!\d)",
            ModelProfile(200_000, 16_384, thinking=ADAPTIVE),
        ),
        (r"claude-((opus|sonnet|haiku)-4|3-7)", ModelProfile(200_000, 16_384, thinking=BUDGET)),
        (r"claude", _CLAUDE),
        (r"gemini-([3-9]|\d\d)", _GEMINI),
        (r"gemini-2\.5", _GEMINI_25),
        (r"deepseek-(reasoner|r1)", ModelProfile(128_000, 32_768)),
        (r"deepseek", ModelProfile(128_000, 8_192)),
        (r"qwen", ModelProfile(32_768, 4_096)),
        (r"llama-?(3\.[1-9]|4)|llama-v3p[1-9]", ModelProfile(131_072, 4_096)),
        (r"llama", ModelProfile(8_192, 1_024)),
    )
)
_DATE = re.compile(r"-\d{8}$")

_PROVIDER_DEFAULTS = {
    "local": _LOCAL,
    "scripted": _SCRIPTED,
    "anthropic": _CLAUDE,
    "gemini": ModelProfile(1_048_576, 65_536),  # an unknown Gemini: no thinking setting
}


def profile_for(
    model_name: str, overrides: Mapping[str, ModelProfile] | None = None
) -> ModelProfile:
    """The profile for ``model_name`` (``provider:model``, or a bare model name).

    Order: an override for the full name, then for the bare name, then the longest override
    key that is a prefix of either; then the embedded ``local:`` and ``scripted:`` providers;
    then :data:`CATALOGUE`; then the known families; then the provider's default; then
    :data:`DEFAULT_PROFILE`. An embedded model known by name (``local:qwen2.5-coder-1.5b``) has
    a profile of its own.
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
    known = CATALOGUE.get(_DATE.sub("", lowered.rsplit("/", 1)[-1]))
    if known is not None:
        return known
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
