"""Prices of the current models (:mod:`retinue.telemetry.prices`) against hand-computed
figures: a usage on each is a number of dollars, a dated id costs what its name costs, and a
cache-read price no source gave makes the cost unknown rather than a guess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retinue.messages import Usage
from retinue.telemetry.prices import cost_usd, price_of, set_prices

CURRENT = (
    "anthropic:claude-fable-5-2", "anthropic:claude-fable-5-1", "anthropic:claude-fable-5",
    "anthropic:claude-opus-5-5", "anthropic:claude-sonnet-5-5", "anthropic:claude-haiku-5-5",
    "openai:gpt-5.4", "openai:gpt-5.6-terra", "openai:gpt-5.6-sol", "openai:gpt-5.6-luna",
    "openai:gpt-6-sol", "openai:gpt-6-astra", "openai:gpt-6-luna",
    "gemini:gemini-3-pro-preview", "gemini:gemini-3-flash-preview", "gemini:gemini-3.8-flash",
)  # fmt: skip
USAGE = Usage(input_tokens=12_000, output_tokens=3_000, cache_read_tokens=2_000, requests=2)


@pytest.fixture(autouse=True)
def no_overrides() -> Iterator[None]:
    set_prices(None)
    yield
    set_prices(None)


@pytest.mark.parametrize("model", CURRENT)
def test_a_usage_on_a_current_model_costs_a_positive_number(model: str) -> None:
    cost = cost_usd(model, USAGE)
    assert isinstance(cost, float) and cost > 0


def test_current_prices_by_hand() -> None:
    # claude-opus-5-5: $4 in, $0.20 cache read, $20 out: 10,000*4 + 2,000*0.2 + 3,000*20
    assert cost_usd("anthropic:claude-opus-5-5", USAGE) == pytest.approx(0.1004)
    # claude-fable-5-2: $8, $0.20, $40: 80,000 + 400 + 120,000
    assert cost_usd("anthropic:claude-fable-5-2", USAGE) == pytest.approx(0.2004)
    # gpt-6-sol: $2, $0.20, $10: 20,000 + 400 + 30,000
    assert cost_usd("openai:gpt-6-sol", USAGE) == pytest.approx(0.0504)
    # gemini-3-flash-preview: $0.50, $0.05, $3: 5,000 + 100 + 9,000
    assert cost_usd("gemini:gemini-3-flash-preview", USAGE) == pytest.approx(0.0141)


def test_cache_write_prices_follow_the_providers_rules() -> None:
    opus = price_of("anthropic:claude-opus-5-5")
    assert opus is not None and (opus.cache_write, opus.cache_write_1h) == (5.0, 8.0)
    sonnet = price_of("anthropic:claude-sonnet-5-5")
    assert sonnet is not None and (sonnet.cache_write, sonnet.cache_write_1h) == (2.5, 4.0)


def test_a_dated_id_costs_what_its_name_costs() -> None:
    assert cost_usd("anthropic:claude-sonnet-5-5-20260929", USAGE) == cost_usd(
        "anthropic:claude-sonnet-5-5", USAGE
    )


def test_an_unknown_cache_read_price_makes_a_cached_usage_unknown() -> None:
    # gpt-5.2's input and output prices are known, its cached-input price is not
    assert cost_usd("openai:gpt-5.2", USAGE) is None
    uncached = Usage(input_tokens=10_000, output_tokens=1_000, requests=1)
    assert cost_usd("openai:gpt-5.2", uncached) == pytest.approx((10_000 * 1.75 + 14_000) / 1e6)


def test_an_override_of_a_current_model_wins() -> None:
    set_prices({"anthropic:claude-opus-5-5": {"input": 1, "output": 1}})
    assert cost_usd("anthropic:claude-opus-5-5", USAGE) == pytest.approx(15_000 / 1e6)
