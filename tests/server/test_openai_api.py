"""The OpenAI-compatible endpoint, driven by the official ``openai`` SDK against a real server
(the models scripted): models, completions streaming and not, conversations, errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import openai
import pytest
from serverkit import Serve, ServerThread

from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def sdk(server: ServerThread, token: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=token or server.token, base_url=f"{server.url}/v1", max_retries=0, timeout=20
    )


def said(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages if m.role != "system"]


def test_models_are_the_main_agent_and_each_role(serve: Serve) -> None:
    server = serve(ScriptedModel())
    client = sdk(server)
    ids = [m.id for m in client.models.list()]
    assert ids[0] == "retinue" and "retinue/slowpoke" in ids
    assert client.models.retrieve("retinue/slowpoke").id == "retinue/slowpoke"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_a_completion_continued_with_its_echoed_key_is_one_conversation(
    serve: Serve, tmp_path
) -> None:
    (tmp_path / "notes.txt").write_text("the code is 42")
    model = ScriptedModel(
        [call_tool("Read", {"file_path": "notes.txt"}), "The code is 42.", "You asked for it."]
    )
    client = sdk(serve(model))
    history: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the code?"},
    ]
    first = client.chat.completions.create(model="retinue", messages=history)
    assert first.choices[0].message.content == "The code is 42."
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.prompt_tokens > 0
    extra = (first.model_extra or {})["retinue"]
    assert extra["tools_used"] == ["Read"] and extra["conversation"].startswith("oai-")
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Why?"},
    ]
    second = client.chat.completions.create(  # the key the server handed out, echoed
        model="retinue",
        messages=history,
        extra_headers={"X-Retinue-Conversation": extra["conversation"]},
    )
    assert second.choices[0].message.content == "You asked for it."
    assert (second.model_extra or {})["retinue"]["conversation"] == extra["conversation"]
    assert (
        model.calls[0]
        .messages[1]
        .content.startswith(  # the client's system message
            "[Earlier in this conversation, as the client sent it:]\n[instructions] Be brief."
        )
    )
    # the second turn continued the Retinue conversation: tool call and result included
    assert [m.role for m in model.calls[2].messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    model.assert_done()


def test_a_streamed_completion_carries_text_and_progress_events(serve: Serve, tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    reading = call_tool("Read", {"file_path": "a.txt"})
    model = ScriptedModel([AssistantMessage("Let me look.", reading.tool_calls), "It says alpha."])
    client = sdk(serve(model))
    stream = client.chat.completions.create(
        model="retinue",
        messages=[{"role": "user", "content": "read a.txt"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look.\n\nIt says alpha."  # each step of the agent, a paragraph
    events = [(c.model_extra or {}).get("retinue", {}).get("event", {}).get("kind") for c in chunks]
    assert "tool_started" in events and "tool_finished" in events
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and finishes.count("stop") == 1
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_the_conversation_header_names_the_conversation(serve: Serve) -> None:
    model = ScriptedModel(["one", "two"])
    server = serve(model)
    client = sdk(server)
    for text in ("first", "second"):
        reply = client.chat.completions.with_raw_response.create(
            model="retinue",
            messages=[{"role": "user", "content": text}],  # only the new turn: the header leads
            extra_headers={"X-Retinue-Conversation": "pinned"},
        )
        assert reply.headers["x-retinue-conversation"] == "pinned"
    assert said(model.calls[1].messages) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]
    with server.client() as http:
        assert [c["id"] for c in http.get("/v1/conversations").json()["conversations"]] == [
            "pinned"
        ]


def test_a_chat_begun_elsewhere_arrives_as_a_transcript(serve: Serve) -> None:
    seen: list[str] = []

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        seen.append(messages[-1].content)
        return "Noted."

    client = sdk(serve(ScriptedModel([answer])))
    client.chat.completions.create(
        model="retinue",
        messages=[
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": [{"type": "text", "text": "Hi, I am Bo."}]},
            {"role": "assistant", "content": "Bonjour Bo."},
            {"role": "user", "content": "Remember me?"},
        ],
    )
    [task] = seen
    assert "[instructions] Answer in French." in task
    assert "[user] Hi, I am Bo." in task and "[assistant] Bonjour Bo." in task
    assert task.endswith("[The new message:]\nRemember me?")


def test_a_role_model_delegates_to_that_role(serve: Serve) -> None:
    main = ScriptedModel()
    slow = ScriptedModel(["slowpoke's answer"], name="scripted:slow")
    client = sdk(serve(main, slow))
    reply = client.chat.completions.create(
        model="retinue/slowpoke", messages=[{"role": "user", "content": "go slowly"}]
    )
    assert reply.choices[0].message.content == "slowpoke's answer"
    assert slow.calls[0].messages[-1].content == "go slowly"
    assert main.call_count == 0
    streamed = sdk(serve(ScriptedModel(), ScriptedModel(["again"], name="scripted:slow")))
    chunks = list(
        streamed.chat.completions.create(
            model="retinue/slowpoke", messages=[{"role": "user", "content": "x"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "again"


def test_errors_reach_the_sdk_as_its_exceptions(serve: Serve) -> None:
    model = ScriptedModel([RuntimeError("boom")])
    server = serve(model)
    client = sdk(server)
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError, match="retinue/nobody"):
        client.chat.completions.create(model="retinue/nobody", messages=user)  # type: ignore[arg-type]
    with pytest.raises(openai.AuthenticationError):
        sdk(server, token="wrong").models.list()
    with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
        client.chat.completions.create(
            model="retinue", messages=[{"role": "assistant", "content": "x"}]
        )
    with pytest.raises(openai.UnprocessableEntityError, match="messages"):
        client.chat.completions.create(model="retinue", messages=[])
    with pytest.raises(openai.APIError, match="boom"):  # the failure, in the stream
        list(client.chat.completions.create(model="retinue", messages=user, stream=True))  # type: ignore[arg-type]
    raw = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {server.token}"},
        json={"model": "retinue", "messages": user},
        timeout=20,
    )
    assert raw.status_code == 502 and "\n" not in raw.text
    assert raw.json()["error"]["code"] == 502 and "unscripted" in raw.json()["error"]["message"]


def test_a_bad_conversation_header_and_a_huge_body_are_refused(serve: Serve) -> None:
    server = serve(ScriptedModel())
    client = sdk(server)
    with pytest.raises(openai.BadRequestError, match="X-Retinue-Conversation"):
        client.chat.completions.create(
            model="retinue",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Retinue-Conversation": "../etc"},
        )
    huge: Any = [{"role": "user", "content": "x" * 1_100_000}]
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="retinue", messages=huge)
    assert refused.value.status_code == 413
    assert "request body over" in refused.value.response.text


# -- issue 25, item 7: conversations are joined only by a key a client sends on purpose ----


def test_two_sdk_clients_that_said_the_same_never_share_a_conversation(serve: Serve) -> None:
    seen: list[str] = []

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        seen.append("\n".join(m.content for m in messages))
        return "hello"

    server = serve(ScriptedModel(responder=answer))
    alice, bob = sdk(server), sdk(server)
    first = [{"role": "user", "content": "hi"}]
    cids = []
    for client in (alice, bob):
        reply = client.chat.completions.create(model="retinue", messages=first)  # type: ignore[arg-type]
        assert reply.choices[0].message.content == "hello"
        cids.append((reply.model_extra or {})["retinue"]["conversation"])
    assert cids[0] != cids[1]
    said_so_far: Any = [*first, {"role": "assistant", "content": "hello"}]
    alice.chat.completions.create(
        model="retinue", messages=[*said_so_far, {"role": "user", "content": "my PIN is 4711"}]
    )
    reply = bob.chat.completions.create(
        model="retinue", messages=[*said_so_far, {"role": "user", "content": "what did I say?"}]
    )
    assert "4711" not in seen[-1]  # bob's turn never saw alice's
    assert seen[-1].count("[user] hi\n") == 1 and seen[-1].endswith("what did I say?")
    # each request without the key is a conversation of its own, seeded with its messages
    second = (reply.model_extra or {})["retinue"]["conversation"]
    assert second not in cids
    # a fixed few-shot prefix joins nobody either
    prefix: Any = [
        {"role": "system", "content": "Translate."},
        {"role": "user", "content": "cat"},
        {"role": "assistant", "content": "chat"},
    ]
    ids = set()
    for client, word in ((alice, "dog"), (bob, "secret word")):
        asked = [*prefix, {"role": "user", "content": word}]
        reply = client.chat.completions.create(model="retinue", messages=asked)
        ids.add((reply.model_extra or {})["retinue"]["conversation"])
    assert len(ids) == 2 and "secret word" not in seen[-2]


def test_a_client_keeps_its_sub_agent_sessions_by_echoing_the_key(serve: Serve) -> None:
    opening = call_tool("SubAgent", {"task": "count", "role": "slowpoke", "interactive": True})
    main = ScriptedModel([opening, "opened", "still there"])
    server = serve(main, ScriptedModel(["one"], name="scripted:slow"))
    client = sdk(server)
    keep = {"X-Retinue-Conversation": "kept", "X-Retinue-Keep-Sessions": "true"}
    user: Any = [{"role": "user", "content": "open a session"}]
    client.chat.completions.create(model="retinue", messages=user, extra_headers=keep)
    with server.client() as http:
        assert [s["id"] for s in http.get("/v1/sessions").json()["sessions"]] == [
            "conv-kept/slowpoke"
        ]
        client.chat.completions.create(
            model="retinue", messages=[{"role": "user", "content": "next"}], extra_headers=keep
        )
        assert len(http.get("/v1/sessions").json()["sessions"]) == 1


# -- issue 25, item 9: OpenAI-shaped errors, and nothing ignored silently -------------------


def test_the_front_doors_refusals_and_unknown_models_carry_their_message(serve: Serve) -> None:
    server = serve(ScriptedModel())
    with pytest.raises(openai.AuthenticationError, match="bearer token") as denied:
        sdk(server, token="wrong").models.list()
    body = denied.value.response.json()["error"]
    assert body["type"] == "authentication_error" and set(body) == {
        "message", "type", "param", "code"
    }  # fmt: skip
    with pytest.raises(openai.NotFoundError, match="'gpt-4o' not found") as unknown:
        sdk(server).models.retrieve("gpt-4o")
    assert unknown.value.response.json()["error"]["type"] == "not_found_error"
    huge: Any = [{"role": "user", "content": "x" * 1_100_000}]
    with pytest.raises(openai.APIStatusError, match="request body over") as refused:
        sdk(server).chat.completions.create(model="retinue", messages=huge)
    assert refused.value.status_code == 413
    assert refused.value.response.json()["error"]["message"].startswith("request body over")


def test_client_tools_and_several_choices_are_refused_with_400(serve: Serve) -> None:
    model = ScriptedModel()
    client = sdk(serve(model))
    user: Any = [{"role": "user", "content": "weather in Paris?"}]
    weather: Any = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    with pytest.raises(openai.BadRequestError, match="'tools' is not supported") as tools:
        client.chat.completions.create(model="retinue", messages=user, tools=[weather])
    assert tools.value.response.json()["error"]["param"] == "tools"
    with pytest.raises(openai.BadRequestError, match="'n' must be 1") as several:
        client.chat.completions.create(model="retinue", messages=user, n=2)
    assert several.value.response.json()["error"]["param"] == "n"
    assert model.call_count == 0  # refused before any turn
