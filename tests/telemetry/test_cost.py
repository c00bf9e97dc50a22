"""Cost in money against hand-computed figures, and a money budget that stops a session as
its token budget does (failed and interrupted turns included)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from subagent_kit import make_kit  # pyright: ignore[reportMissingImports]

from retinue.config import Settings
from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.errors import ConfigError, ModelError, SessionError
from retinue.llm.base import ModelResponse
from retinue.messages import AssistantMessage, SystemMessage, Usage
from retinue.subagents.roles import parse_role
from retinue.telemetry.prices import cost_usd, format_cost, price_of, set_prices
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(20)


@tool("Echo")
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


hanging: list[bool] = []


@tool("Hang")
async def hang(ctx: ToolContext) -> str:
    """Wait a long time."""
    hanging.append(True)
    await asyncio.sleep(30)
    return "woke"


@pytest.fixture(autouse=True)
def no_overrides() -> Iterator[None]:
    set_prices(None)
    yield
    set_prices(None)


def test_default_prices_by_hand() -> None:
    # gpt-4o: $2.50 in, $1.25 cached in, $10 out per million tokens
    u = Usage(input_tokens=12_000, output_tokens=3_000, cache_read_tokens=2_000, requests=2)
    # 10,000 * 2.50 + 2,000 * 1.25 + 3,000 * 10 = 25,000 + 2,500 + 30,000 = 57,500 / 1e6
    assert cost_usd("openai:gpt-4o", u) == pytest.approx(0.0575)
    # claude-sonnet-4-5: $3 in, $0.30 cached, $15 out: 30,000 + 600 + 45,000 = 0.0756
    assert cost_usd("anthropic:claude-sonnet-4-5", u) == pytest.approx(0.0756)
    # gpt-4o-mini: 10,000 * 0.15 + 2,000 * 0.075 + 3,000 * 0.60 = 1,500 + 150 + 1,800
    assert cost_usd("openai:gpt-4o-mini", u) == pytest.approx(0.00345)
    assert cost_usd("local:qwen2.5-coder-0.5b", u) == 0.0


def test_an_unknown_price_is_unknown_never_zero() -> None:
    u = Usage(1000, 1000, 0, 1)
    assert price_of("openai:gpt-9") is None and cost_usd("openai:gpt-9", u) is None
    assert format_cost(None) == "cost unknown"
    assert format_cost(0.0575) == "$0.0575" and format_cost(0.0) == "$0.0000"


def test_model_prices_override_and_add() -> None:
    set_prices(
        {
            "openai:gpt-4o": {"input": 1.0, "cached_input": 0.5, "output": 4.0},
            "acme:m1": {"input": 2.0, "output": 8.0},
        }
    )
    u = Usage(1_000_000, 500_000, 200_000, 1)
    assert cost_usd("openai:gpt-4o", u) == pytest.approx(0.8 + 0.1 + 2.0)
    assert cost_usd("acme:m1", u) == pytest.approx(2.0 + 4.0)  # cached = input when not set
    set_prices(None)
    assert cost_usd("acme:m1", u) is None


def fixed(message: AssistantMessage, inp: int, out: int) -> ModelResponse:
    return ModelResponse(message, Usage(inp, out, 0, 1), "stop")


def session(tmp_path: Path, model: ScriptedModel, budget: float) -> Session:
    ctx = ToolContext("s1", tmp_path, tmp_path)
    config = RunConfig(
        model, [SystemMessage("s")], ToolRegistry([echo, hang]), ctx, interactive=True
    )
    return Session("s1", config, budget_usd=budget)


async def test_a_money_budget_refuses_the_turn_after_it_is_spent(tmp_path: Path) -> None:
    set_prices({"acme:m1": {"input": 1.0, "output": 10.0}})
    # each call: 100,000 in ($0.10) + 10,000 out ($0.10) = $0.20
    model = ScriptedModel(
        [
            fixed(AssistantMessage("one"), 100_000, 10_000),
            fixed(AssistantMessage("two"), 100_000, 10_000),
        ],
        name="acme:m1",
    )
    s = session(tmp_path, model, budget=0.30)
    await s.send("first")
    assert s.cost_usd == pytest.approx(0.20)
    await s.send("second")  # $0.20 < $0.30: allowed, as a token budget lets a turn start
    assert s.cost_usd == pytest.approx(0.40)
    with pytest.raises(SessionError, match=r"has spent \$0\.4000, its budget is \$0\.3: end it"):
        await s.send("third")
    assert model.call_count == 2


async def test_failed_and_interrupted_turns_count_against_the_money_budget(
    tmp_path: Path,
) -> None:
    set_prices({"acme:m1": {"input": 1.0, "output": 10.0}})
    echo_step = AssistantMessage("", (call_tool("Echo", {"text": "x"}).tool_calls[0],))
    hang_step = AssistantMessage("", (call_tool("Hang", {}).tool_calls[0],))
    model = ScriptedModel([fixed(echo_step, 100_000, 10_000), ModelError("down")], name="acme:m1")
    s = session(tmp_path, model, budget=0.25)
    with pytest.raises(ModelError):
        await s.send("fails after one paid call")
    assert s.cost_usd == pytest.approx(0.20)

    model.add(fixed(hang_step, 100_000, 10_000))  # paid for; its tool hangs until interrupted
    turn = asyncio.create_task(s.send("interrupted after a second paid call"))
    while not hanging:
        await asyncio.sleep(0.01)
    assert s.interrupt()
    assert (await turn).stop_reason == "interrupted"
    assert s.cost_usd == pytest.approx(0.40)
    with pytest.raises(SessionError, match="its budget is"):
        await s.send("refused")


async def test_a_money_budget_stops_a_turn_before_its_next_model_call(tmp_path: Path) -> None:
    set_prices({"acme:m1": {"input": 1.0, "output": 10.0}})
    step = AssistantMessage("", (call_tool("Echo", {"text": "x"}).tool_calls[0],))
    model = ScriptedModel(
        [fixed(step, 100_000, 10_000), fixed(step, 100_000, 10_000), "never reached"],
        name="acme:m1",
    )
    s = session(tmp_path, model, budget=0.30)
    with pytest.raises(SessionError, match=r"has spent \$0\.4000, its budget is \$0\.3"):
        await s.send("a long task")
    assert model.call_count == 2 and model.remaining == 1
    assert s.messages[-1].content.startswith("[This turn failed before it finished")


async def test_a_budget_on_a_model_without_a_price_is_refused(tmp_path: Path) -> None:
    s = session(tmp_path, ScriptedModel(["x"], name="acme:unpriced"), budget=1.0)
    assert s.cost_usd is None
    with pytest.raises(SessionError, match=r"price of acme:unpriced is unknown"):
        await s.send("hi")


def test_a_bad_price_entry_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"\[model_prices\] 'acme:m1': give input and output"):
        set_prices({"acme:m1": {"input": 1.0}})


def test_config_toml_sets_prices_budget_and_tracing(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "max_budget_usd = 2.5\notel_endpoint = 'http://127.0.0.1:4318'\n"
        "otel_capture_content = true\n"
        "[model_prices]\n'acme:m1' = { input = 2, output = 8.5 }\n",
        encoding="utf-8",
    )
    s = Settings.load(home=tmp_path, workspace=tmp_path)
    assert s.max_budget_usd == 2.5 and s.otel_capture_content is True
    assert s.otel_endpoint == "http://127.0.0.1:4318"
    assert s.model_prices == {"acme:m1": {"input": 2, "output": 8.5}}
    (tmp_path / "config.toml").write_text("max_budget_usd = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="max_budget_usd"):
        Settings.load(home=tmp_path, workspace=tmp_path)


def test_a_role_reads_its_money_budget_from_front_matter() -> None:
    for key in ("maxBudgetUsd", "max_budget_usd"):
        role = parse_role(Path("r.md"), f"---\nname: r\ndescription: d\n{key}: 0.5\n---\nbody")
        assert role.max_budget_usd == 0.5 and key not in role.ignored
    bad = parse_role(Path("r.md"), "---\nname: r\ndescription: d\nmaxBudgetUsd: lots\n---\nbody")
    assert bad.max_budget_usd is None and any("maxBudgetUsd" in n for n in bad.notes)


async def test_a_roles_money_budget_stops_its_session(tmp_path: Path) -> None:
    set_prices({"scripted:reviewer": {"input": 1000.0, "output": 1000.0}})
    kit = make_kit(tmp_path, "reviewer")
    catalog = kit.manager.factory.catalog
    role = catalog.roles["reviewer"]
    catalog.roles["reviewer"] = dataclasses.replace(role, max_budget_usd=0.001)
    kit.models["reviewer"].add("first and last")
    ctx = kit.ctx()
    await kit.manager.interactive_subagent(ctx, "t", "reviewer")
    with pytest.raises(SessionError, match=r"has spent \$\d+\.\d+, its budget is \$0\.001"):
        await kit.manager.interactive_subagent(ctx, "again", "reviewer")
    await kit.manager.unload_subagent("main", "reviewer")


def test_without_an_endpoint_tracing_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from retinue.telemetry import trace as tel

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tel.setup(None) is False and tel.ENABLED is False
