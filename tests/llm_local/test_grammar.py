"""The grammars of the two-step constrained reply: built from real tool schemas, accepted by
llama.cpp's parser, and strict where they must be."""

from __future__ import annotations

import pytest

from retinue.llm._grammar import (
    ANSWER,
    ANSWER_GRAMMAR,
    arguments_grammar,
    call_prefix,
    choice_grammar,
)
from retinue.llm.local import render_tools
from retinue.subagents.tools import subagent_tools
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.memory import memory_tools

llama_cpp = pytest.importorskip("llama_cpp")


def parses(source: str) -> bool:
    return llama_cpp.LlamaGrammar.from_string(source, verbose=False) is not None


def function(name: str, parameters: dict[str, object]) -> dict[str, object]:
    return {"name": name, "parameters": parameters}


def test_the_choice_is_one_word_answer_or_an_offered_tool() -> None:
    source = choice_grammar(["Read", "mcp__db__query"])
    assert source == f'root ::= "{ANSWER}" | "Read" | "mcp__db__query"'
    assert parses(source)


@pytest.mark.parametrize("compact", [False, True])
def test_every_builtin_tool_gives_an_arguments_grammar_llama_cpp_accepts(compact: bool) -> None:
    tools = [*builtin_tools(), *subagent_tools(), *memory_tools()]
    for rendered in render_tools([t.spec for t in tools], compact=compact):
        source = arguments_grammar(rendered["function"])
        assert source.startswith('root ::= rt-args "}\\n</tool_call>"')
        assert parses(source), rendered["function"]["name"]


def test_the_call_prefix_and_the_arguments_make_the_models_own_call_format() -> None:
    assert call_prefix("Read") == '<tool_call>\n{"name": "Read", "arguments": '


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
    source = arguments_grammar(function("Make", schema))
    assert parses(source)
    assert '"\\"description\\""' in source and '"\\"title\\""' in source


def test_a_recursive_schema_still_gives_a_grammar() -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
    }
    assert parses(arguments_grammar(function("Tree", schema)))


def test_answers_may_not_open_a_tag_nor_start_blank_or_as_json() -> None:
    assert parses(ANSWER_GRAMMAR)
    first = next(line for line in ANSWER_GRAMMAR.splitlines() if line.startswith("rt-first ::="))
    assert "[^<{`\\x00 \\t\\r\\n]" in first and '"```" [^j`\\x00]' in first
    assert 'rt-char ::= [^<\\x00] | "<" [^t\\x00]' in ANSWER_GRAMMAR
