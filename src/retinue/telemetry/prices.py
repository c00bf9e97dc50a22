"""What a model's tokens cost: a price table per model and the cost of a usage in US dollars.

A price is per million tokens, three figures: input, cached input (the part of the prompt the
provider read from its cache, which ``Usage.input_tokens`` includes) and output. Defaults
cover the models the README names; ``[model_prices]`` in ``config.toml`` adds or overrides
(see :func:`set_prices`). A model without a price has an *unknown* cost: :func:`cost_usd`
returns ``None`` and :func:`format_cost` says "unknown", never ``$0``. The embedded local
model (``local:…``) costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from retinue.errors import ConfigError
from retinue.messages import Usage

__all__ = [
    "DEFAULT_PRICES",
    "ModelPrice",
    "cost_usd",
    "format_cost",
    "price_of",
    "set_prices",
]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens."""

    input: float
    cached_input: float
    output: float


# Public list prices per million tokens (input, cached input, output).
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "openai:gpt-4o-mini": ModelPrice(0.15, 0.075, 0.60),
    "openai:gpt-4o": ModelPrice(2.50, 1.25, 10.00),
    "anthropic:claude-sonnet-4-5": ModelPrice(3.00, 0.30, 15.00),
    "anthropic:claude-opus-4-1": ModelPrice(15.00, 1.50, 75.00),
    "anthropic:claude-haiku-4-5": ModelPrice(1.00, 0.10, 5.00),
    # ai.google.dev/gemini-api/docs/pricing, paid tier, prompts up to 200k tokens (longer
    # prompts cost more); output includes thinking tokens
    "gemini:gemini-3-pro": ModelPrice(2.00, 0.20, 12.00),
    "gemini:gemini-3-pro-preview": ModelPrice(2.00, 0.20, 12.00),
    "gemini:gemini-3-flash": ModelPrice(0.50, 0.05, 3.00),
    "gemini:gemini-3-flash-preview": ModelPrice(0.50, 0.05, 3.00),
    "gemini:gemini-2.5-pro": ModelPrice(1.25, 0.125, 10.00),
    "gemini:gemini-2.5-flash": ModelPrice(0.30, 0.03, 2.50),
}
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
    """The price of ``model`` (``provider:model``), or None when it is not known."""
    found = _overrides.get(model) or DEFAULT_PRICES.get(model)
    if found is None and model.startswith(_FREE_PROVIDERS):
        return _FREE
    return found


def cost_usd(model: str, usage: Usage) -> float | None:
    """What ``usage`` of ``model`` cost in US dollars; None when its price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    cached = min(usage.cache_read_tokens, usage.input_tokens)
    return (
        (usage.input_tokens - cached) * price.input
        + cached * price.cached_input
        + usage.output_tokens * price.output
    ) / 1_000_000


def format_cost(cost: float | None) -> str:
    """``$0.0123`` (four decimals, more for sub-cent figures), or ``cost unknown``."""
    if cost is None:
        return "cost unknown"
    return f"${cost:.4f}" if cost == 0 or cost >= 0.0001 else f"${cost:.6f}"
