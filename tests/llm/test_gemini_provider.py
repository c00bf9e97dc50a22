"""GeminiModel through the official google-genai SDK against the loopback emulation of
Gemini's documented rules (``retinue.llm.loopback_gemini``): signatures kept and returned
where they came from, the 400s when they are not, usage, refusals, settings and errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from retinue.errors import ConfigError, ContextTooLongError, ModelError, ModelRefusal
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.gemini import GeminiModel, build_config
from retinue.llm.loopback_gemini import LoopbackGeminiServer
from retinue.llm.resolve import resolve_model
from retinue.llm.settings import ModelSettings
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool

ADD = ToolSpec(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


@pytest.fixture
def gemini() -> Iterator[Any]:
    started: list[LoopbackGeminiServer] = []

    def start(script: ScriptedModel, **options: Any) -> LoopbackGeminiServer:
        server = LoopbackGeminiServer(script, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def _model(server: LoopbackGeminiServer, name: str = "gemini-3-pro", **kw: Any) -> GeminiModel:
    return GeminiModel(name, base_url=server.base_url, max_retries=0, **kw)


async def _loop(model: GeminiModel, history: list[Message], *, stream: bool) -> ModelResponse:
    """Run the tool loop to the end (the add tool answered here), history extended."""
    while True:
        chunks: list[str] = []
        reply = await model.complete(history, [ADD], on_text=chunks.append if stream else None)
        history.append(reply.message)
        if not reply.message.tool_calls:
            if stream:
                assert "".join(chunks) == reply.message.content
            return reply
        for call in reply.message.tool_calls:
            args = json.loads(call.arguments)
            history.append(ToolResultMessage(call.id, call.name, str(args["a"] + args["b"])))


def _steps() -> list[Any]:
    return [
        call_tool("add", {"a": 2, "b": 3}, id="c1"),
        call_tool("add", {"a": 5, "b": 10}, id="c2"),
        "15",
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_loop_on_gemini_3_returns_every_signature(gemini: Any, stream: bool) -> None:
    server = gemini(ScriptedModel(_steps()))
    model = _model(server)
    history: list[Message] = [SystemMessage("Be brief."), UserMessage("2+3, then +10")]
    reply = await _loop(model, history, stream=stream)
    await model.aclose()
    assert reply.message.content == "15"
    assert server.rejected == [] and server.request_count == 3
    # each step's call came back with the signature it was given, on the call's own part
    last = server.requests[-1]["contents"]
    sigs = [
        (p["functionCall"]["name"], p.get("thoughtSignature"))
        for c in last
        for p in c["parts"]
        if "functionCall" in p
    ]
    assert [name for name, _ in sigs] == ["add", "add"] and all(sig for _, sig in sigs)
    assert last[0] == {"parts": [{"text": "2+3, then +10"}], "role": "user"}
    assert server.requests[-1]["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    # the text answer's signature is kept too (G1), to go back on its text part
    assert [p.data["part"] for p in reply.message.reasoning] == ["text"]


async def test_dropping_the_signatures_is_the_documented_400(gemini: Any) -> None:
    """The second request of the loop as the adapter writes it is accepted; the same request
    with its signatures stripped (Retinue before Gemini was a provider of its own) is the
    documented 400, sent through the same official SDK."""
    from google import genai
    from google.genai import errors, types

    server = gemini(ScriptedModel([*_steps()[:1], "5", "5"]))
    model = _model(server)
    history: list[Message] = [UserMessage("2+3")]
    first = await model.complete(history, [ADD])
    await model.aclose()
    history += [first.message, ToolResultMessage("c1", "add", "5")]
    contents, built = build_config("gemini-3-pro", history, [ADD])
    config = types.GenerateContentConfig.model_validate(built)
    stripped = json.loads(json.dumps(contents))
    for content in stripped:
        for part in content["parts"]:
            part.pop("thought_signature", None)
    assert stripped != contents
    options = types.HttpOptions(base_url=server.base_url, api_version="v1beta")
    client = genai.Client(api_key="test", http_options=options).aio
    kept = await client.models.generate_content(
        model="gemini-3-pro", contents=contents, config=config
    )
    with pytest.raises(errors.ClientError) as caught:
        await client.models.generate_content(model="gemini-3-pro", contents=stripped, config=config)
    await client.aclose()
    assert kept.text == "5"
    assert caught.value.code == 400
    assert caught.value.message is not None
    assert caught.value.message.startswith(
        "Function call is missing a thought_signature in functionCall parts."
    )
    assert "function call `default_api:add` , position 2" in caught.value.message
    assert [status for status, _ in server.rejected] == [400]


async def test_a_changed_or_moved_signature_is_refused(gemini: Any) -> None:
    server = gemini(ScriptedModel(_steps()))
    model = _model(server)
    history: list[Message] = [UserMessage("2+3, then +10")]
    first = await model.complete(history, [ADD])
    (part,) = first.message.reasoning
    sig = part.data["thought_signature"]
    flipped = ("B" if sig[0] == "A" else "A") + sig[1:]
    changed = replace(part, data={**part.data, "thought_signature": flipped})
    moved = replace(part, data={"thought_signature": sig, "part": "text"})
    for bad in (changed, moved):
        message = replace(first.message, content="thinking", reasoning=(bad,))
        with pytest.raises(ModelError, match="Corrupted thought signature"):
            await model.complete([*history, message, ToolResultMessage("c1", "add", "5")], [ADD])
    await model.aclose()
    assert [status for status, _ in server.rejected] == [400, 400]


async def test_parallel_calls_carry_one_signature_on_the_first_call(gemini: Any) -> None:
    both = AssistantMessage(
        "", (ToolCall("p1", "add", '{"a": 1, "b": 1}'), ToolCall("p2", "add", '{"a": 2, "b": 2}'))
    )
    server = gemini(ScriptedModel([both, "2 and 4"]))
    model = _model(server)
    history: list[Message] = [UserMessage("1+1 and 2+2")]
    reply = await _loop(model, history, stream=False)
    await model.aclose()
    assert reply.message.content == "2 and 4" and server.rejected == []
    model_turn, results = server.requests[1]["contents"][1:3]
    assert ["thoughtSignature" in p for p in model_turn["parts"]] == [True, False]
    # both results in one content, right after the call turn (G4)
    assert [p["functionResponse"]["id"] for p in results["parts"]] == ["p1", "p2"]


async def test_only_the_current_turn_is_validated_and_another_models_history_passes(
    gemini: Any,
) -> None:
    """A history made by gemini-3-pro sent to gemini-3-flash: no signature crosses models;
    the finished turn needs none, the current turn's step gets the documented placeholder."""
    server = gemini(ScriptedModel([*_steps(), call_tool("add", {"a": 1, "b": 1}), "2"]))
    pro = _model(server)
    history: list[Message] = [UserMessage("2+3, then +10")]
    await _loop(pro, history, stream=False)
    history.append(UserMessage("and 1+1?"))
    first = await pro.complete(history, [ADD])
    history += [first.message, ToolResultMessage(first.message.tool_calls[0].id, "add", "2")]
    flash = _model(server, "gemini-3-flash")
    reply = await flash.complete(history, [ADD])
    await pro.aclose()
    await flash.aclose()
    assert reply.message.content == "2" and server.rejected == []
    sent = [p.get("thoughtSignature") for c in server.requests[-1]["contents"] for p in c["parts"]]
    assert [s for s in sent if s] == ["skip_thought_signature_validator"]


async def test_usage_counts_prompt_cached_and_thought_tokens(gemini: Any) -> None:
    step = ModelResponse(AssistantMessage("ok"), Usage(1000, 40, 600, 1))
    server = gemini(ScriptedModel([step, step]))
    model = _model(server)
    plain = await model.complete([UserMessage("hi")])
    streamed = await model.complete([UserMessage("hi")], on_text=lambda _: None)
    await model.aclose()
    # thoughts (8 of the 40, as the emulator reports them) are billed as output
    assert plain.usage == streamed.usage == Usage(1000, 40, 600, 1)
    assert plain.finish_reason == "stop"


@pytest.mark.parametrize("reason", ["refusal", "blocked"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_safety_stop_or_blocked_prompt_is_a_refusal(
    gemini: Any, reason: str, stream: bool
) -> None:
    server = gemini(ScriptedModel([ModelResponse(AssistantMessage(""), finish_reason=reason)]))
    model = _model(server)
    with pytest.raises(ModelRefusal, match=r"SAFETY|PROHIBITED_CONTENT"):
        await model.complete([UserMessage("something bad")], on_text=print if stream else None)
    await model.aclose()


async def test_settings_reach_the_generation_config(gemini: Any) -> None:
    server = gemini(ScriptedModel(["a", "b", "c"]))
    settings = ModelSettings(effort="high", max_output_tokens=512, temperature=0.3, top_p=0.9)
    three = _model(server).with_settings(settings)
    two = _model(server, "gemini-2.5-flash").with_settings(ModelSettings(effort="low"))
    extra = _model(server).with_settings(ModelSettings(extra={"top_k": 5, "tools": []}))
    for model in (three, two, extra):
        await model.complete([UserMessage("hi")])
        await model.aclose()
    first, second, third = (r["generationConfig"] for r in server.requests)
    thinking = first.get("thinkingConfig")
    assert thinking in ({"thinkingLevel": "HIGH"}, {"thinking_level": "HIGH"})
    assert first["maxOutputTokens"] == 512
    assert first["temperature"] == 0.3 and first["topP"] == 0.9
    assert json.dumps(second["thinkingConfig"]).count("1024") == 1
    assert third == {"topK": 5.0} or third == {"topK": 5}
    assert "tools" not in server.requests[2]  # Retinue's own field is not overridden


async def test_429_and_503_are_retried_then_an_error_names_the_attempts(gemini: Any) -> None:
    server = gemini(ScriptedModel(["fine"]), fail_first=[429, 503])
    model = GeminiModel("gemini-3-pro", base_url=server.base_url, max_retries=2, retry_delay=0.01)
    assert (await model.complete([UserMessage("hi")])).message.content == "fine"
    assert server.request_count == 3
    await model.aclose()
    failing = gemini(ScriptedModel([]), fail_always=500)
    model = GeminiModel("gemini-3-pro", base_url=failing.base_url, max_retries=1, retry_delay=0.01)
    with pytest.raises(ModelError, match="HTTP 500 on all 2 attempts") as caught:
        await model.complete([UserMessage("hi")])
    await model.aclose()
    assert caught.value.status_code == 500 and failing.request_count == 2


async def test_a_prompt_over_the_window_is_context_too_long(gemini: Any) -> None:
    server = gemini(ScriptedModel([ContextTooLongError("prompt is 2M tokens")]))
    model = _model(server)
    with pytest.raises(ContextTooLongError):
        await model.complete([UserMessage("a very long prompt")])
    await model.aclose()


def test_model_strings_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        resolve_model("gemini:gemini-3-pro")
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    model = resolve_model("gemini-3-pro")  # a bare id names its provider
    assert isinstance(model, GeminiModel) and model.name == "gemini:gemini-3-pro"
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    vertex = resolve_model("gemini:gemini-3-pro")
    assert isinstance(vertex, GeminiModel) and vertex.vertexai
    assert vertex.base_url == "https://europe-west4-aiplatform.googleapis.com"


def test_reasoning_of_other_providers_is_never_sent(gemini: Any) -> None:
    from retinue.llm._gemini_wire import request_contents

    foreign = (
        ReasoningPart("anthropic", "claude-fable-5-2", "thinking", {"signature": "x"}, "hm"),
        ReasoningPart("openai", "gpt-5.6-terra", "reasoning", {"id": "rs_1"}),
    )
    history: list[Message] = [
        UserMessage("hi"),
        AssistantMessage("hello", reasoning=foreign),
        UserMessage("again"),
    ]
    _, contents = request_contents(history, "gemini-3-pro")
    assert contents[1] == {"role": "model", "parts": [{"text": "hello"}]}


async def test_thinking_levels_a_pro_model_takes(gemini: Any) -> None:
    """Gemini 3 Pro thinks low or high: Retinue's medium goes as high; a thinking level and a
    budget together are the documented 400 (rule G5), here only through ``extra``."""
    server = gemini(ScriptedModel(["a"]))
    pro = _model(server).with_settings(ModelSettings(effort="medium"))
    await pro.complete([UserMessage("hi")])
    await pro.aclose()
    assert "HIGH" in json.dumps(server.requests[0]["generationConfig"])
    both = {"thinking_config": {"thinking_level": "low", "thinking_budget": 128}}
    broken = _model(server).with_settings(ModelSettings(extra=both))
    with pytest.raises(ModelError, match="HTTP 400") as caught:
        await broken.complete([UserMessage("hi")])
    await broken.aclose()
    assert caught.value.status_code == 400 and len(server.rejected) == 1


async def test_calls_without_ids_are_answered_by_name_and_position(gemini: Any) -> None:
    server = gemini(ScriptedModel(_steps()), call_ids=False)
    model = _model(server)
    history: list[Message] = [UserMessage("2+3, then +10")]
    reply = await _loop(model, history, stream=True)
    await model.aclose()
    assert reply.message.content == "15" and server.rejected == []
    ids = [c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(set(ids)) == 2  # Retinue made one per call
    sent = json.dumps(server.requests[-1])
    assert '"id"' not in sent  # and never sent them
    assert sent.count('"functionResponse"') == 2


def test_doctor_reaches_gemini_with_its_key_header() -> None:
    from retinue.cli.doctor import Check, Provider, provider_targets

    env = {"GEMINI_API_KEY": "AIza-test-key-0123456789"}
    (target,) = provider_targets("local:qwen2.5-coder-0.5b", env)
    assert target == Provider(
        "gemini",
        "https://generativelanguage.googleapis.com",
        env["GEMINI_API_KEY"],
        "GEMINI_API_KEY",
        "/v1beta/models",
    )
    assert isinstance(target, Provider)
    assert target.headers() == {"x-goog-api-key": env["GEMINI_API_KEY"]}
    (missing,) = provider_targets("gemini:gemini-3-pro", {})
    assert isinstance(missing, Check) and missing.fix == "set GEMINI_API_KEY"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], "must be an object"),
        ({"candidates": []}, "no candidate"),
        ({"candidates": [{"content": {"parts": ["x"]}}]}, "a part must be an object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}, "name"),
        (
            {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": 3}}]}}]},
            "must be an object",
        ),
        ({"candidates": [{"finishReason": "OTHER"}]}, "stopped without an answer"),
        ({"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL"}]}, "malformed function"),
    ],
)
def test_a_malformed_or_empty_reply_is_one_line(data: Any, match: str) -> None:
    from retinue.llm._gemini_wire import response_from_json

    with pytest.raises(ModelError, match=match) as caught:
        response_from_json(data, "gemini-3-pro")
    assert "\n" not in str(caught.value)


def test_a_stored_part_with_a_broken_position_is_left_out() -> None:
    from retinue.llm._gemini_wire import request_contents

    broken = ReasoningPart(
        "gemini",
        "gemini-2.5-pro",
        "thought_signature",
        {"thought_signature": "c2ln", "part": "function_call", "index": "zero"},
    )
    call = AssistantMessage("", (ToolCall("c1", "add", "{}"),), reasoning=(broken,))
    history: list[Message] = [UserMessage("hi"), call, ToolResultMessage("c1", "add", "1")]
    _, contents = request_contents(history, "gemini-2.5-pro")
    assert contents[1]["parts"] == [{"function_call": {"name": "add", "args": {}, "id": "c1"}}]


async def test_a_fallback_model_takes_over_mid_turn_without_a_400(gemini: Any) -> None:
    """gemini-3-pro answers a call, then is overloaded; gemini-3-flash (another server, other
    keys) takes the turn in progress: pro's signatures are not sent to it, the step it did
    not make carries the documented placeholder, and it accepts the request."""
    from retinue.llm.fallback import FallbackModel

    overloaded = ModelError("overloaded", status_code=503)
    primary = gemini(ScriptedModel([_steps()[0], overloaded]))
    backup = gemini(ScriptedModel(["5"]))
    model = FallbackModel(_model(primary), [_model(backup, "gemini-3-flash")])
    history: list[Message] = [UserMessage("2+3")]
    first = await model.complete(history, [ADD])
    history += [first.message, ToolResultMessage("c1", "add", "5")]
    second = await model.complete(history, [ADD])
    for m in (model.primary, *model.fallbacks):
        assert isinstance(m, GeminiModel)
        await m.aclose()
    assert second.message.content == "5" and second.fallback_from == "gemini:gemini-3-pro"
    assert primary.rejected == [] and backup.rejected == []
    (call,) = [p for c in backup.requests[0]["contents"] for p in c["parts"] if "functionCall" in p]
    assert call["thoughtSignature"] == "skip_thought_signature_validator"
