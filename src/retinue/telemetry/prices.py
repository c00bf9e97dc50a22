"""What a model's tokens cost: a price table per model and the cost of a usage in US dollars.

A price is per million tokens: input, cached input (the part of the prompt the provider read
from its cache, which ``Usage.input_tokens`` includes), output, and where the provider sells
them, cache writes (Anthropic's 5-minute and 1-hour, OpenAI's). Defaults cover the current
models of each provider, each family with the page its figures come from (read 2026-12);
``[model_prices]`` in ``config.toml`` adds or overrides (see :func:`set_prices`). A dated id
(``claude-opus-5-5-20260922``) is priced as its name.

A model without a price has an *unknown* cost: :func:`cost_usd` returns ``None`` and
:func:`format_cost` says "unknown", never ``$0``; so does a usage with cache reads on a model
whose cache-read price no source gave. The embedded local model (``local:…``) costs nothing.

Long prompts: some models charge more for every token of a request whose prompt passes a
threshold (:class:`LongPrompt`): Gemini's Pro models over 200K tokens (2x input, 1.5x output:
ai.google.dev/gemini-api/docs/pricing, "prompts > 200k tokens"), OpenAI's GPT-5.4 over 272K
(2x input, 1.5x output, "for the full session": developers.openai.com/api/docs/pricing), and
Claude Sonnet 4 / 4.5 / 4.6 on their 1M-token context over 200K (2x input, 1.5x output:
platform.claude.com/docs/en/about-claude/pricing, "Long context pricing"). A usage of one
request is priced by its own prompt; an aggregate of several (a session's) by its mean prompt
per request, an estimate. Not modelled: tiers whose multipliers no source gave (Claude Haiku
5.5 over 100K is priced at its short-prompt rate, so underestimated), and cache writes, which
``Usage`` does not count apart (they are priced as input).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from retinue.errors import ConfigError
from retinue.messages import Usage

__all__ = [
    "DEFAULT_PRICES",
    "LongPrompt",
    "ModelPrice",
    "cost_usd",
    "format_cost",
    "price_of",
    "set_prices",
]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens; ``None`` where no source gave the figure."""

    input: float
    cached_input: float | None
    output: float
    cache_write: float | None = None
    """A cache write (Anthropic's 5-minute TTL; OpenAI's cache write)."""
    cache_write_1h: float | None = None
    """Anthropic's 1-hour cache write."""
    long: LongPrompt | None = None
    """The dearer rate of a prompt over a threshold, when the model has one."""


@dataclass(frozen=True, slots=True)
class LongPrompt:
    """Every token of a request whose prompt is over ``over`` input tokens costs ``input``
    times the input (and cached-input) price and ``output`` times the output price."""

    over: int
    input: float = 2.0
    output: float = 1.5


_GEMINI_PRO_LONG = LongPrompt(200_000)  # ai.google.dev/gemini-api/docs/pricing
_GPT54_LONG = LongPrompt(272_000)  # developers.openai.com/api/docs/pricing (GPT-5.4)
_SONNET_1M_LONG = LongPrompt(200_000)  # platform.claude.com/docs/en/about-claude/pricing


def _claude(inp: float, read: float, out: float, long: LongPrompt | None = None) -> ModelPrice:
    # cache writes: 1.25x input for 5 minutes, 2x for an hour (pricing page, "Prompt caching")
    return ModelPrice(inp, read, out, inp * 1.25, inp * 2, long)


# Public list prices per million tokens (input, cached input, output[, cache writes]).
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "openai:gpt-4o-mini": ModelPrice(0.15, 0.075, 0.60),
    "openai:gpt-4o": ModelPrice(2.50, 1.25, 10.00),
    # OpenAI: developers.openai.com/api/docs/models and /pricing. GPT-6: OpenAI's Sep 3 and
    # Sep 22 2026 prices as github.com/TheKrush/PromptFuel v1.0.19 / v1.0.21 and
    # merefield/codexometer v0.18.4 record them (input, cached input, cache write, output);
    # GPT-6.1 / 6.2: github.com/akiiwa-games/AgentCompass-Router v0.6.8, TheKrush/PromptFuel
    # v1.0.24, premk134/codex-token-watch v0.3.3. GPT-5.6: the models page (Sol $4 / $20 since
    # 2026-08-21, Terra $2 / $12, Luna $0.20 / $1.20); cached input a tenth of input ("billed
    # at a tenth of the normal input price on the newest models", api-evangelist's reading of
    # the pricing page, 2026-11-05). GPT-5.4 / 5.5: the pricing page's table as
    # www.morphllm.com/openai-api-pricing quotes it (June 2026). GPT-5.2: $1.75 / $14
    # (docs.venice.ai/models/gpt-5-2), cached input unknown.
    "openai:gpt-6.2-astra": ModelPrice(8.00, 0.40, 40.00),
    "openai:gpt-6.2-sol": ModelPrice(2.00, 0.10, 10.00),
    "openai:gpt-6.1-sol": ModelPrice(2.00, 0.10, 10.00),
    "openai:gpt-6.1-terra": ModelPrice(1.00, 0.05, 5.00, cache_write=1.25),
    "openai:gpt-6-astra": ModelPrice(10.00, 1.00, 50.00),
    "openai:gpt-6-sol": ModelPrice(2.00, 0.20, 10.00, cache_write=2.50),
    "openai:gpt-6-luna": ModelPrice(0.10, 0.01, 0.50, cache_write=0.125),
    "openai:gpt-5.6": ModelPrice(4.00, 0.40, 20.00),
    "openai:gpt-5.6-sol": ModelPrice(4.00, 0.40, 20.00),
    "openai:gpt-5.6-terra": ModelPrice(2.00, 0.20, 12.00),
    "openai:gpt-5.6-luna": ModelPrice(0.20, 0.02, 1.20),
    "openai:gpt-5.5": ModelPrice(5.00, 0.50, 30.00),
    "openai:gpt-5.4": ModelPrice(2.50, 0.25, 15.00, long=_GPT54_LONG),
    "openai:gpt-5.4-mini": ModelPrice(0.75, 0.075, 4.50),
    "openai:gpt-5.4-nano": ModelPrice(0.20, 0.02, 1.25),
    "openai:gpt-5.2": ModelPrice(1.75, None, 14.00),
    # Anthropic: platform.claude.com/docs/en/about-claude/pricing ("Model pricing") and each
    # model's overview page. Fable 5.2: $8 / $40, cache read $0.20 (overview pages' "How it
    # compares" table; cache figures as github.com/phuryn/claude-usage v1.5.7 and
    # archid21/rightsize v0.10.2 read them from the pricing page, 2026-12-01). Sonnet 5.5's
    # cache read fell from $0.20 to $0.10 on 2026-10-07 (kurofune/claudit v1.9.2). Haiku 5.5:
    # prompts up to 100K tokens (5x over that).
    "anthropic:claude-fable-5-2": _claude(8.00, 0.20, 40.00),
    "anthropic:claude-mythos-5-2": _claude(8.00, 0.20, 40.00),
    "anthropic:claude-fable-5-1": _claude(10.00, 0.25, 50.00),
    "anthropic:claude-mythos-5-1": _claude(10.00, 0.25, 50.00),
    "anthropic:claude-fable-5": _claude(10.00, 1.00, 50.00),
    "anthropic:claude-mythos-5": _claude(10.00, 1.00, 50.00),
    "anthropic:claude-opus-5-5": _claude(4.00, 0.20, 20.00),
    "anthropic:claude-opus-5": _claude(5.00, 0.50, 25.00),
    "anthropic:claude-sonnet-5-5": _claude(2.00, 0.10, 10.00),
    "anthropic:claude-sonnet-5": _claude(2.00, 0.20, 10.00),
    "anthropic:claude-haiku-5-5": ModelPrice(0.10, 0.01, 0.50, 0.125, 0.20),
    "anthropic:claude-opus-4-8": _claude(5.00, 0.50, 25.00),
    "anthropic:claude-opus-4-7": _claude(5.00, 0.50, 25.00),
    "anthropic:claude-opus-4-6": _claude(5.00, 0.50, 25.00),
    "anthropic:claude-opus-4-5": _claude(5.00, 0.50, 25.00),
    "anthropic:claude-sonnet-4-6": _claude(3.00, 0.30, 15.00, _SONNET_1M_LONG),
    "anthropic:claude-sonnet-4-5": _claude(3.00, 0.30, 15.00, _SONNET_1M_LONG),
    "anthropic:claude-opus-4-1": _claude(15.00, 1.50, 75.00),
    "anthropic:claude-haiku-4-5": _claude(1.00, 0.10, 5.00),
    # ai.google.dev/gemini-api/docs/pricing, paid tier, prompts up to 200k tokens (longer
    # prompts cost more); output includes thinking tokens. Gemini 3.1 Pro: $2 / $12
    # (inference.sh's OpenRouter listing), cache read not found. Gemini 3.6 and 3.8 Flash:
    # introductory rates through 2026-12-31, then $1.50 / $0.15 / $7.50 (the pricing page as
    # github.com/anomalyco/models.dev and BerriAI/litellm discussion 39357 quote it); 3.5
    # Flash: github.com/simstudioai/sim PR 4660.
    "gemini:gemini-3.8-flash": ModelPrice(0.75, 0.075, 3.75),
    "gemini:gemini-3.6-flash": ModelPrice(0.75, 0.075, 3.75),
    "gemini:gemini-3.5-flash": ModelPrice(1.50, 0.15, 9.00),
    "gemini:gemini-3.1-pro-preview": ModelPrice(2.00, None, 12.00, long=_GEMINI_PRO_LONG),
    "gemini:gemini-3-pro": ModelPrice(2.00, 0.20, 12.00, long=_GEMINI_PRO_LONG),
    "gemini:gemini-3-pro-preview": ModelPrice(2.00, 0.20, 12.00, long=_GEMINI_PRO_LONG),
    "gemini:gemini-3-flash": ModelPrice(0.50, 0.05, 3.00),
    "gemini:gemini-3-flash-preview": ModelPrice(0.50, 0.05, 3.00),
    "gemini:gemini-2.5-pro": ModelPrice(1.25, 0.125, 10.00, long=_GEMINI_PRO_LONG),
    "gemini:gemini-2.5-flash": ModelPrice(0.30, 0.03, 2.50),
}
_DATE = re.compile(r"-\d{8}$")
_FREE_PROVIDERS = ("local:",)  # runs on this machine
_FREE = ModelPrice(0.0, 0.0, 0.0)

_overrides: dict[str, ModelPrice] = {}


def set_prices(table: Mapping[str, Mapping[str, float]] | None) -> None:
    """Prices from ``[model_prices]``: ``{"openai:gpt-4o": {"input": 2.5, "output": 10,
    "cached_input": 1.25}}`` (``cached_input`` defaults to ``input``). Replaces the earlier
    overrides; the defaults stay under them."""
    prices = {}
    for model, p in (table or {}).items():
        unknown = set(p) - {"input", "cached_input", "output"}
        if "input" not in p or "output" not in p or unknown:
            raise ConfigError(
                f"[model_prices] {model!r}: give input and output (and optionally "
                f"cached_input) in US dollars per million tokens, not {sorted(p)}"
            )
        prices[model] = ModelPrice(
            float(p["input"]), float(p.get("cached_input", p["input"])), float(p["output"])
        )
    _overrides.clear()
    _overrides.update(prices)


def price_of(model: str) -> ModelPrice | None:
    """The price of ``model`` (``provider:model``), or None when it is not known. A dated id
    without a price of its own is priced as its name without the date."""
    for name in dict.fromkeys((model, _DATE.sub("", model))):
        found = _overrides.get(name) or DEFAULT_PRICES.get(name)
        if found is not None:
            return found
    return _FREE if model.startswith(_FREE_PROVIDERS) else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """What ``usage`` of ``model`` cost in US dollars; None when its price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    cached = min(usage.cache_read_tokens, usage.input_tokens)
    if cached and price.cached_input is None:
        return None  # no source gave this model's cache-read price
    in_x = out_x = 1.0
    per_request = usage.input_tokens / max(usage.requests, 1)
    if price.long is not None and per_request > price.long.over:
        in_x, out_x = price.long.input, price.long.output
    return (
        (usage.input_tokens - cached) * price.input * in_x
        + cached * (price.cached_input or 0.0) * in_x
        + usage.output_tokens * price.output * out_x
    ) / 1_000_000


def format_cost(cost: float | None) -> str:
    """``$0.0123`` (four decimals, more for sub-cent figures), or ``cost unknown``."""
    if cost is None:
        return "cost unknown"
    return f"${cost:.4f}" if cost == 0 or cost >= 0.0001 else f"${cost:.6f}"
