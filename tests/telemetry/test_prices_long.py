"""Long prompts cost more where the provider says so: the tier is chosen per request's prompt."""

from __future__ import annotations

import pytest

from retinue.messages import Usage
from retinue.telemetry.prices import cost_usd, price_of


def test_gemini_pro_over_200k_costs_2x_input_and_1_5x_output() -> None:
    # ai.google.dev pricing: gemini-2.5-pro $1.25 / $10 up to 200K, $2.50 / $15 above
    short = Usage(input_tokens=200_000, output_tokens=1_000, requests=1)
    long = Usage(input_tokens=200_001, output_tokens=1_000, requests=1)
    assert cost_usd("gemini:gemini-2.5-pro", short) == pytest.approx(
        (200_000 * 1.25 + 10_000) / 1e6
    )
    assert cost_usd("gemini:gemini-2.5-pro", long) == pytest.approx(
        (200_001 * 2.50 + 1_000 * 15) / 1e6
    )


def test_cached_tokens_of_a_long_prompt_cost_the_long_rate_too() -> None:
    u = Usage(input_tokens=300_000, output_tokens=0, cache_read_tokens=100_000, requests=1)
    # gemini-3-pro: $2 in, $0.20 cached; x2 above 200K
    assert cost_usd("gemini:gemini-3-pro", u) == pytest.approx(
        (200_000 * 4.0 + 100_000 * 0.40) / 1e6
    )


def test_gpt_5_4_threshold_is_272k_and_flash_models_have_no_tier() -> None:
    at = Usage(input_tokens=272_000, requests=1)
    over = Usage(input_tokens=272_001, requests=1)
    assert cost_usd("openai:gpt-5.4", at) == pytest.approx(272_000 * 2.50 / 1e6)
    assert cost_usd("openai:gpt-5.4", over) == pytest.approx(272_001 * 5.00 / 1e6)
    flash = Usage(input_tokens=900_000, requests=1)
    assert price_of("gemini:gemini-2.5-flash") is not None
    assert cost_usd("gemini:gemini-2.5-flash", flash) == pytest.approx(900_000 * 0.30 / 1e6)


def test_a_session_of_short_requests_is_not_priced_as_one_long_prompt() -> None:
    # three requests of 150K each: 450K in all, but no request passed 200K
    session = Usage(input_tokens=450_000, output_tokens=3_000, requests=3)
    assert cost_usd("anthropic:claude-sonnet-4-5", session) == pytest.approx(
        (450_000 * 3.0 + 3_000 * 15.0) / 1e6
    )
    # three of 250K each: every one over the threshold
    longer = Usage(input_tokens=750_000, output_tokens=3_000, requests=3)
    assert cost_usd("anthropic:claude-sonnet-4-5", longer) == pytest.approx(
        (750_000 * 6.0 + 3_000 * 22.5) / 1e6
    )
