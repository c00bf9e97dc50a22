"""The tool-call grammar: built from real tool schemas, accepted by llama.cpp's parser."""

from __future__ import annotations

import pytest

from retinue.llm._grammar import tool_call_grammar
from retinue.llm.local import render_tools
from retinue.subagents.tools import subagent_tools
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.memory import memory_tools

llama_cpp = pytest.importorskip("llama_cpp")


def parses(source: str) -> bool:
    return llama_cpp.LlamaGrammar.from_string(source, verbose=False) is not None


@pytest.mark.parametrize("compact", [False, True])
def test_every_builtin_tool_set_gives_a_grammar_llama_cpp_accepts(compact: bool) -> None:
    tools = [*builtin_tools(), *subagent_tools(), *memory_tools()]
    source = tool_call_grammar(render_tools([t.spec for t in tools], compact=compact))
    assert parses(source)
    for t in tools:
        assert f'"\\"{t.name}\\""' in source  # each name is a literal of the grammar


def function(name: str, parameters: dict[str, object]) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_parameters_named_like_annotations_are_kept_and_refs_inlined() -> None:
    schema = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "what it is"},
            "item": {"$ref": "#/$defs/Item"},
        },
        "required": ["description", "item"],
        "$defs": {"Item": {"type": "object", "properties": {"title": {"type": "integer"}}}},
    }
    source = tool_call_grammar([function("Make", schema)])
    assert parses(source)
    assert '"\\"description\\""' in source and '"\\"title\\""' in source


def test_a_recursive_schema_still_gives_a_grammar() -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
    }
    assert parses(tool_call_grammar([function("Tree", schema)]))


def test_answers_may_not_open_a_tag_nor_start_blank_or_as_json() -> None:
    source = tool_call_grammar([function("Noop", {"type": "object", "properties": {}})])
    first = next(line for line in source.splitlines() if line.startswith("rt-first ::="))
    assert "[^<{`\\x00 \\t\\r\\n]" in first and '"```" [^j`\\x00]' in first
    assert 'rt-fenced ::= "```json\\n" rt-call-json' in source
