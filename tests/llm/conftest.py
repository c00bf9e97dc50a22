"""A loopback Anthropic Messages server for the provider tests (the OpenAI one ships in
``retinue.llm.loopback``); both answer from a ScriptedModel over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackServer
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if b.get("type") == "text")


def messages_from_anthropic(body: dict[str, Any]) -> list[Message]:
    """A Messages API request body back into Retinue messages."""
    out: list[Message] = []
    if body.get("system"):
        out.append(SystemMessage(_text(body["system"])))
    names: dict[str, str] = {}
    for m in body["messages"]:
        blocks = m["content"]
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if m["role"] == "assistant":
            calls = tuple(
                ToolCall(b["id"], b["name"], json.dumps(b["input"]))
                for b in blocks
                if b["type"] == "tool_use"
            )
            names.update((c.id, c.name) for c in calls)
            out.append(AssistantMessage(_text(blocks), calls))
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                tid = b["tool_use_id"]
                content = _text(b.get("content", ""))
                out.append(
                    ToolResultMessage(tid, names.get(tid, ""), content, bool(b.get("is_error")))
                )
            elif b["type"] == "text":
                out.append(UserMessage(b["text"]))
    return out


class LoopbackAnthropicServer(LoopbackServer):
    """``POST /v1/messages`` in the Anthropic dialect; ``base_url`` has no ``/v1``."""

    path_suffix = "/v1/messages"

    def parse(self, body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
        tools = [
            ToolSpec(t["name"], t.get("description", ""), t["input_schema"])
            for t in body.get("tools") or ()
        ]
        return messages_from_anthropic(body), tools

    def _usage(self, response: ModelResponse) -> dict[str, int]:
        u = response.usage
        return {
            "input_tokens": u.input_tokens - u.cache_read_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens,
            "cache_creation_input_tokens": 0,
        }

    def _stop(self, response: ModelResponse) -> str:
        if response.message.tool_calls:
            return "tool_use"
        return _STOP.get(response.finish_reason, "end_turn")

    def render(self, response: ModelResponse, model: str) -> dict[str, Any]:
        m = response.message
        content: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        content += [
            {"type": "tool_use", "id": t.id, "name": t.name, "input": json.loads(t.arguments)}
            for t in m.tool_calls
        ]
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": self._stop(response),
            "stop_sequence": None,
            "usage": self._usage(response),
        }

    def render_stream(self, response: ModelResponse, body: dict[str, Any]) -> bytes:
        m = response.message
        start = {**self.render(response, str(body.get("model", ""))), "content": []}
        start["stop_reason"] = None
        start["usage"] = {**self._usage(response), "output_tokens": 1}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        index = 0
        if m.content:
            events.append(_block_start(index, {"type": "text", "text": ""}))
            events += [
                _delta(index, {"type": "text_delta", "text": p}) for p in self.chunks(m.content)
            ]
            events.append({"type": "content_block_stop", "index": index})
            index += 1
        for t in m.tool_calls:
            events.append(
                _block_start(index, {"type": "tool_use", "id": t.id, "name": t.name, "input": {}})
            )
            events += [
                _delta(index, {"type": "input_json_delta", "partial_json": p})
                for p in self.chunks(t.arguments)
            ]
            events.append({"type": "content_block_stop", "index": index})
            index += 1
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop(response), "stop_sequence": None},
                "usage": {"output_tokens": response.usage.output_tokens},
            }
        )
        events.append({"type": "message_stop"})
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        if code == "context_length_exceeded":
            message, code = f"prompt is too long: {message}", "invalid_request_error"
        return {"type": "error", "error": {"type": code, "message": message}}


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


AnthropicServerFactory = Callable[..., LoopbackServer]


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServerFactory]:
    """Start Anthropic loopback servers: ``anthropic_server(model, **options)``."""
    started: list[LoopbackServer] = []

    def start(model: Model, **options: Any) -> LoopbackServer:
        server = LoopbackAnthropicServer(model, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
