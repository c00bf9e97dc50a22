"""The local provider without a model: naming, missing extra, message rendering, lazy import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from retinue.errors import ConfigError
from retinue.llm.base import ToolSpec
from retinue.llm.local import (
    QWEN_TOOL_RESULT_PROMPT,
    LocalModel,
    ToolResultPrompt,
    render_messages,
    render_tools,
)
from retinue.llm.resolve import resolve_model
from retinue.messages import AssistantMessage, SystemMessage, ToolCall, ToolResultMessage
from retinue.messages import UserMessage as User


def test_unknown_local_model_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown local model 'gpt-9'.*qwen2\.5-coder-0\.5b"):
        resolve_model("local:gpt-9")


def test_missing_llama_cpp_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    with pytest.raises(ConfigError) as info:
        LocalModel()
    assert "uv sync --extra local" in str(info.value)
    assert "pip install 'retinue[local]'" in str(info.value)


def test_importing_retinue_does_not_import_llama_cpp() -> None:
    code = (
        "import sys, retinue, retinue.llm.resolve, retinue.llm.local; "
        "print('llama_cpp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_messages_render_as_chat_template_dicts() -> None:
    messages = [
        SystemMessage("sys"),
        User("add 2 and 3"),
        AssistantMessage("", (ToolCall("c1", "add", '{"a": 2, "b": 3}'),)),
        ToolResultMessage("c1", "add", "5"),
        AssistantMessage("", (ToolCall("c2", "add", "not json"),)),
    ]
    out = render_messages(messages)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant"]
    assert out[2]["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "5"}
    assert out[4]["tool_calls"][0]["function"]["arguments"] == "not json"


def test_tools_render_as_function_specs() -> None:
    spec = ToolSpec("add", "Add two numbers.", {"type": "object", "properties": {}})
    assert render_tools([spec]) == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


def test_tool_results_can_be_shown_as_one_user_turn_with_an_instruction() -> None:
    prompt = ToolResultPrompt(ok="OK-LINE", error="ERROR-LINE")
    call = AssistantMessage("", (ToolCall("c1", "a", "{}"), ToolCall("c2", "b", "{}")))
    messages = [
        User("q"),
        call,
        ToolResultMessage("c1", "a", "1"),
        ToolResultMessage("c2", "b", "2"),
    ]
    out = render_messages(messages, prompt)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[2]["content"] == (
        "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>\nOK-LINE"
    )
    failed = render_messages(
        [*messages[:2], ToolResultMessage("c1", "a", "Error: x", True)], prompt
    )
    assert failed[-1]["content"].endswith("ERROR-LINE")
    assert "Error: x" in failed[-1]["content"]


def test_the_embedded_model_uses_its_tool_result_prompt_by_default() -> None:
    pytest.importorskip("llama_cpp")
    assert LocalModel("qwen2.5-coder-0.5b").tool_results == QWEN_TOOL_RESULT_PROMPT
    assert LocalModel("qwen2.5-coder-0.5b", tool_results=None).tool_results is None
    assert LocalModel().tool_results is None  # the default (1.5B) uses the template's tool turns


def test_small_model_tools_keep_types_and_required_descriptions_only() -> None:
    schema = {
        "type": "object",
        "title": "Params",
        "properties": {
            "path": {"type": "string", "title": "Path", "description": "Where. Long detail."},
            "limit": {
                "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                "default": None,
                "description": "How many lines to read at most.",
            },
        },
        "required": ["path"],
    }
    spec = ToolSpec("Read", "Read a file. Returns numbered lines.", schema)
    [tool] = render_tools([spec], small_model=True)
    assert tool["function"]["description"] == "Read a file."
    assert tool["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where"},
            "limit": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
    }
