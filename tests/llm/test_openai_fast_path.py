"""The lean HTTP/1.1 path of ``OpenAIModel`` (plain-HTTP servers) and the cached wire encoder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import cast

import pytest

from retinue.llm._http11 import FastPoster, Unanswered, fast_path_allowed
from retinue.llm._openai_wire import WireEncoder, _encode, _message_json, message_to_openai
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.openai import OpenAIModel, build_request
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel

ADD = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}})


def echo(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """Answer with the last user message, so a reply says which request it belongs to."""
    return next(m.content for m in reversed(messages) if isinstance(m, UserMessage))


@pytest.fixture
async def server() -> AsyncIterator[LoopbackOpenAIServer]:
    with LoopbackOpenAIServer(ScriptedModel(responder=echo)) as s:
        yield s


async def test_a_plain_request_takes_the_lean_path_and_keeps_the_connection(
    server: LoopbackOpenAIServer,
) -> None:
    model = OpenAIModel("m", base_url=server.base_url)
    assert model._fast is not None
    for text in ("one", "two", "three"):
        out = await model.complete([SystemMessage("sys"), UserMessage(text)], [ADD])
        assert out.message.content == text
    assert server.request_count == 3  # no second try through the SDK
    assert server.requests[0] == build_request(
        "m", [SystemMessage("sys"), UserMessage("one")], [ADD], stream=False
    )
    assert len(model._fast.get()._idle) == 1  # one kept-alive connection served all three
    await model.aclose()
    assert model._fast.get()._idle == []


async def test_a_cancelled_request_does_not_leave_its_answer_to_the_next() -> None:
    answer_first = threading.Event()  # the first answer waits until its request is cancelled

    def held(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if messages[-1].content == "first":
            answer_first.wait(60)
        return echo(messages, tools)

    with LoopbackOpenAIServer(ScriptedModel(responder=held)) as server:
        model = OpenAIModel("m", base_url=server.base_url)
        first = asyncio.create_task(model.complete([UserMessage("first")]))
        while server.request_count < 1:
            await asyncio.sleep(0.005)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        answer_first.set()
        out = await model.complete([UserMessage("second")])
        await model.aclose()
    assert out.message.content == "second"


def test_only_plain_http_without_a_proxy_takes_the_lean_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert fast_path_allowed("http://127.0.0.1:8000/v1")
    assert not fast_path_allowed("https://api.openai.com/v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not fast_path_allowed("http://10.0.0.5:8000/v1")
    monkeypatch.setenv("NO_PROXY", "10.0.0.5")
    assert fast_path_allowed("http://10.0.0.5:8000/v1")


async def test_chunked_answers_and_connections_closed_by_the_server() -> None:
    """A raw server: the first answer is chunked and the connection is then closed while
    idle; the next request finds it dead and goes on over a fresh one."""
    requests: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        requests.append(await reader.readexactly(length))
        body = json.dumps({"n": len(requests)}).encode()
        half = len(body) // 2
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
            % (half, body[:half], len(body) - half, body[half:])
        )
        await writer.drain()
        writer.close()  # keep-alive was not refused: the client finds out on reuse

    raw = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = raw.sockets[0].getsockname()[1]
    poster = FastPoster(f"http://127.0.0.1:{port}/v1", {"Content-Type": "application/json"}, 5)
    try:
        first = await poster.post("/x", [b'{"a":1}'])
        await asyncio.sleep(0.05)  # the server's close reaches the idle connection
        second = await poster.post("/x", [b'{"a":2}'])
    finally:
        await poster.close()
        raw.close()
        await raw.wait_closed()
    assert (first.status, json.loads(first.body)) == (200, {"n": 1})
    assert (second.status, json.loads(second.body)) == (200, {"n": 2})
    assert requests == [b'{"a":1}', b'{"a":2}']


async def test_a_kept_alive_connection_times_out_on_its_own_deadline() -> None:
    """The first answer comes at once, the second never: the second request times out
    (its own deadline, not the first's timer) and its connection is not kept."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError):  # (the client hangs up)
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                seen.append(await reader.readexactly(length))
                if len(seen) == 1:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                # later requests: no answer
        writer.close()

    raw = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = raw.sockets[0].getsockname()[1]
    poster = FastPoster(f"http://127.0.0.1:{port}", {}, 0.3)
    loop = asyncio.get_running_loop()
    try:
        first = await poster.post("/x", [b"1"])
        await asyncio.sleep(0.2)  # the first exchange's timer is still pending
        started = loop.time()
        with pytest.raises(Unanswered) as caught:
            await poster.post("/x", [b"2"])
        waited = loop.time() - started
    finally:
        await poster.close()
        raw.close()
    assert (first.status, first.body) == (200, b"{}")
    assert caught.value.timed_out and waited >= 0.25  # not cut short at the first's 0.3 s
    assert poster._idle == [] and seen == [b"1", b"2"]


def conversation(turns: int) -> list[Message]:
    out: list[Message] = [SystemMessage("sys é"), UserMessage("go")]
    for k in range(turns):
        call = ToolCall(f"c{k}", "add", '{"a": 1, "b": 2}')
        out += [AssistantMessage("", (call,)), ToolResultMessage(call.id, "add", "3 ✓")]
    return [*out, AssistantMessage("done")]


@pytest.mark.parametrize("max_bytes", [8 * 2**20, 200])
def test_the_wire_encoder_matches_the_request_dict(max_bytes: int) -> None:
    """Cached parts (and a cache small enough to drop them) give the same body."""
    encoder = WireEncoder(max_bytes)
    messages = conversation(6)
    for n in range(1, len(messages) + 1):  # a growing history, as turns make it
        body = encoder.body("m", messages[:n], [ADD])
        assert json.loads(body) == build_request("m", messages[:n], [ADD], stream=False)
    stream = encoder.body("m", messages, [], {"stream": True, "stream_options": {"x": 1}})
    assert json.loads(stream) == {
        **build_request("m", messages, [], stream=False),
        "stream": True,
        "stream_options": {"x": 1},
    }


def test_the_wire_encoder_sees_a_rewritten_history() -> None:
    """The last body is reused only when the next starts with the very same messages: a
    history rewritten in the middle (compression), or another conversation, is re-joined."""
    encoder = WireEncoder()
    messages = conversation(4)
    encoder.body("m", messages, [])
    summary = [*messages[:2], UserMessage("[summary of earlier turns]"), *messages[6:]]
    other = conversation(2)
    edited = [*messages[:3], UserMessage("edited"), *messages[4:], UserMessage("more")]
    histories = (summary, other, messages, [*messages, UserMessage("more")], edited)
    for history in (*histories, tuple(edited), [*edited, UserMessage("again")]):
        body = encoder.body("m", history, [])
        assert json.loads(body) == build_request("m", history, [], stream=False)


def test_bodies_already_made_stay_as_they_were_while_the_history_grows() -> None:
    """The joined messages are a buffer extended in place by the next body: what a caller
    joined from the pieces before (a body, a request) never changes after."""
    encoder = WireEncoder()
    messages = conversation(5)
    made = []
    for n in range(1, len(messages) + 1):
        pieces = encoder.parts("m", messages[:n], [ADD])
        made.append((n, b"".join(pieces)))
    for n, body in made:
        assert json.loads(body) == build_request("m", messages[:n], [ADD], stream=False)


def test_the_direct_message_json_is_the_dict_encoding_byte_for_byte() -> None:
    """Tool results and tool-calling replies are written without a dict: the same bytes."""
    tricky = 'quote " backslash \\ newline \n tab \t nul \x00 é ✓ \u2028 😀'
    calls = (ToolCall("c1", "add", '{"a": 1}'), ToolCall(tricky, tricky, tricky))
    messages: list[Message] = [
        ToolResultMessage("c1", "add", tricky),
        ToolResultMessage("", "", "", is_error=True),
        AssistantMessage("", calls),
        AssistantMessage(tricky, calls[:1]),
        AssistantMessage(tricky),
        UserMessage(tricky),
    ]
    for m in messages:
        assert _message_json(m) == _encode(message_to_openai(m))


def test_the_wire_encoder_reuses_an_equal_history_and_follows_new_tools() -> None:
    """Equal (not identical) messages have the same JSON, so the joined prefix serves; a
    changed tool list is encoded again."""
    encoder = WireEncoder()
    messages = conversation(3)
    encoder.body("m", messages, [ADD])
    kept = len(encoder._new)
    other = ToolSpec("sub", "Subtract", {"type": "object"})
    copies = [*(replace(m) for m in messages), UserMessage("next")]
    rebuilt = [replace(m) for m in reversed(messages)]  # equal messages, not a prefix
    for history, tools in ((copies, [ADD]), (rebuilt, [ADD, other]), (messages, [])):
        body = encoder.body("m", history, tools)
        assert json.loads(body) == build_request("m", history, tools, stream=False)
    assert len(encoder._new) == kept + 1  # only "next" was encoded again
    assert json.loads(encoder.body("n", messages, [other]))["model"] == "n"
    odd = UserMessage(cast(str, [{"type": "text", "text": "a list"}]))  # not hashable
    body = json.loads(encoder.body("m", [*messages, odd], []))
    assert body["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "a list"}]}


def test_a_file_name_that_is_not_utf8_does_not_break_the_history() -> None:
    """A tool result holding a lone surrogate (a file name that is not UTF-8, as Glob shows
    it) is sent with ``?`` in its place, and every later body still carries every message."""
    encoder = WireEncoder()
    history: list[Message] = [SystemMessage("sys"), UserMessage("u1")]
    encoder.body("m", history, [])
    call = ToolCall("c1", "Glob", "{}")
    history += [AssistantMessage("", (call,)), ToolResultMessage("c1", "Glob", "caf\udce9.txt")]
    sent = json.loads(encoder.body("m", history, []))["messages"]
    assert sent[-1]["content"] == "caf?.txt"
    history += [AssistantMessage("ok"), UserMessage("u2")]
    later = json.loads(encoder.body("m", history, []))["messages"]
    assert [m["role"] for m in later] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
