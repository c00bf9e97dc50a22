"""The native tool format (``tool_format="native"``): the chat template's own tool section,
free text until the model opens a call, then grammars for the call's name and arguments only.

Grammars are parsed and matched by llama.cpp itself (the ``vocab_model`` and
``grammar_accepts`` fixtures), as in ``test_grammar.py``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, cast

import pytest

from retinue.llm._grammar import (
    ANSWER_GRAMMAR,
    arguments_grammar,
    call_name_grammar,
    call_prefix,
)
from retinue.llm.local import render_tools
from retinue.subagents.tools import subagent_tools
from retinue.tools.builtin import builtin_tools

pytest.importorskip("llama_cpp")

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from retinue.llm._local_engine import (
    Engine,
    GenerateRequest,
    _call_opening,
    _Prompt,
    grammar_parses,
)

GrammarAccepts = Callable[[str, str], bool]
SAMPLES = re.compile(r"\be\.g\.|\bfor example\b|\bsuch as\b|path/to/", re.IGNORECASE)

MAKE = {
    "name": "Make",
    "parameters": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "size": {"type": "integer"},
            "verbose": {"type": "boolean"},
        },
        "required": ["name", "size"],
    },
}


def test_the_call_name_grammar_allows_only_offered_tools(
    vocab_model: Any, grammar_accepts: GrammarAccepts
) -> None:
    source = call_name_grammar(["Read", "mcp__db__query"])
    assert grammar_parses(vocab_model, source)
    opened = "<tool_call>\n"
    for name in ("Read", "mcp__db__query"):
        assert grammar_accepts(source, call_prefix(name).removeprefix(opened))
    assert not grammar_accepts(source, '{"name": "Write", "arguments": ')
    # the template's own example shows doubled braces; a call may not copy them
    assert not grammar_accepts(source, '{{"name": "Read", "arguments": ')


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [
        ('{"name": "a", "size": 1}', True),  # the optional one left out
        ('{"name": "a", "size": 1, "verbose": true}', True),
        ('{"name": "a"}', False),  # a required one missing
        ('{"name": "a", "size": 1, "colour": "red"}', False),
    ],
)
def test_after_the_name_optional_arguments_stay_optional(
    grammar_accepts: GrammarAccepts, arguments: str, ok: bool
) -> None:
    source = arguments_grammar(MAKE, None)
    assert grammar_accepts(source, arguments + "}\n</tool_call>") is ok


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("I will look.\n<tool_call>", 13),
        ("<tool_call>", 0),
        ('  {"name"', 0),  # a bare JSON reply is a call
        ('{{"name"', 0),  # as the template's example spells it
        ("```json\n", 0),
        ("The answer is 4.", None),
        ("Use `{x}` here", None),
        ("```python\nprint(1)", None),
        ("```", None),  # not yet known
    ],
)
def test_a_call_opens_at_the_tag_or_at_a_reply_that_starts_as_json(
    text: str, at: int | None
) -> None:
    assert _call_opening(text) == at


def test_the_native_prompt_shows_the_tools_in_the_templates_section_without_sample_values(
    vocab_model: Any,
) -> None:
    template = vocab_model.metadata["tokenizer.chat_template"]
    formatter = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")
    tools = render_tools([t.spec for t in (*builtin_tools(), *subagent_tools())], small_model=True)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    prompt = formatter(messages=messages, tools=tools).prompt  # type: ignore[arg-type]
    tool_section = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert all(f'"name": "{t["function"]["name"]}"' in tool_section for t in tools)
    assert not SAMPLES.search(tool_section)


class _Worker:
    """Stands in for the model's worker process: answers every request with ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, request_id: int, payload: Any, on_event: Any, cancelled: Any) -> Any:
        return {"text": self.text, "input_tokens": 10, "output_tokens": 5, "finish": "stop"}


@pytest.mark.parametrize("tool_format", ["native", "steps"])
async def test_only_the_native_format_reads_a_described_call(
    monkeypatch: pytest.MonkeyPatch, tool_format: str
) -> None:
    import json

    from retinue.llm.base import ToolSpec
    from retinue.llm.local import LocalModel
    from retinue.messages import UserMessage

    text = 'Here is the command:\n```bash\nGlob pattern="*" path="."\n```'
    model = LocalModel("qwen2.5-coder-1.5b", tool_format=tool_format)
    monkeypatch.setattr(model, "worker", lambda: _Worker(text))
    glob = ToolSpec("Glob", "Find files.", {"type": "object", "properties": {
        "pattern": {"type": "string"}, "path": {"type": "string"}}})  # fmt: skip
    response = await model.complete([UserMessage("Which files are here?")], [glob])
    calls = response.message.tool_calls
    if tool_format == "native":
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            ("Glob", {"pattern": "*", "path": "."})
        ]
        assert response.finish_reason == "tool_calls"
    else:  # steps decodes under a grammar: a reply that is not a call is an answer
        assert calls == () and "Glob pattern" in response.message.content


async def test_a_native_reply_that_makes_a_call_is_kept_as_the_call_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The text around a call (what the first run's model copied as its answer once the
    result came back) streams to the user but stays out of the history."""
    from retinue.llm.base import ToolSpec
    from retinue.llm.local import LocalModel
    from retinue.messages import UserMessage

    prose = "To list the files, you can use the `Glob` function. Here's the command:"
    text = f'{prose}\n\n```json\n{{"name": "Glob", "arguments": {{"pattern": "*"}}}}\n```\n'
    model = LocalModel("qwen2.5-coder-1.5b", tool_format="native")
    monkeypatch.setattr(model, "worker", lambda: _StreamingWorker(text))
    glob = ToolSpec("Glob", "Find files.", {"type": "object", "properties": {
        "pattern": {"type": "string"}}})  # fmt: skip
    shown: list[str] = []
    response = await model.complete(
        [UserMessage("Which files are here?")], [glob], on_text=shown.append
    )
    assert [c.name for c in response.message.tool_calls] == ["Glob"]
    assert response.message.content == ""
    await asyncio.sleep(0)  # (streamed text is handed over through the event loop)
    assert prose in "".join(shown) and "arguments" not in "".join(shown)


class _StreamingWorker(_Worker):
    """A stand-in worker that streams its whole text as one piece before it returns."""

    def generate(self, request_id: int, payload: Any, on_event: Any, cancelled: Any) -> Any:
        on_event({"text": self.text})
        return super().generate(request_id, payload, on_event, cancelled)


class _ScriptedLlama:
    """Stands in for ``llama_cpp.Llama`` in :meth:`Engine._native`: each completion streams
    the next text, and the grammar it was given is kept."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.grammars: list[Any] = []

    def create_completion(self, tokens: list[int], **options: Any) -> Any:
        self.grammars.append(options["grammar"])
        text = self.texts.pop(0)
        pieces = [text] if text else []
        chunks = [{"choices": [{"text": p, "finish_reason": None}]} for p in pieces]
        chunks.append({"choices": [{"text": "", "finish_reason": "stop"}]})
        return (chunk for chunk in chunks)  # a generator, as llama-cpp-python streams


def test_an_empty_native_reply_is_asked_again_once_as_an_answer() -> None:
    engine = object.__new__(Engine)  # no model: completions are scripted
    llm = _ScriptedLlama("\n", "The files are a.txt.")
    engine.llm, engine._grammars = cast("Any", llm), {}
    engine._grammar = lambda source: source  # type: ignore[method-assign]
    engine._tokens = lambda messages, tools: _Prompt([1, 2, 3], [])  # type: ignore[method-assign]
    request = GenerateRequest([{"role": "user", "content": "hi"}], [], 64, 0.0, 1, True, "native")
    done = engine._native(request, lambda event: None, lambda: False)
    assert done["text"] == "The files are a.txt."
    assert llm.grammars == [None, ANSWER_GRAMMAR]


def test_a_native_reply_with_text_is_not_asked_again() -> None:
    engine = object.__new__(Engine)
    llm = _ScriptedLlama("Hello.")
    engine.llm, engine._grammars = cast("Any", llm), {}
    engine._tokens = lambda messages, tools: _Prompt([1, 2, 3], [])  # type: ignore[method-assign]
    request = GenerateRequest([{"role": "user", "content": "hi"}], [], 64, 0.0, 1, True, "native")
    assert engine._native(request, lambda event: None, lambda: False)["text"] == "Hello."
    assert llm.grammars == [None]
