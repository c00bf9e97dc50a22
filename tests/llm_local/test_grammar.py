"""The grammars of the two-step constrained reply: built from real tool schemas, accepted by
llama.cpp's parser, and strict where they must be.

Parsing and matching use llama.cpp itself, with the embedded model's vocabulary (the
``vocab_model`` and ``grammar_accepts`` fixtures): ``LlamaGrammar.from_string`` only stores the
text, so it cannot tell a broken grammar from a good one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from retinue.llm._grammar import (
    ANSWER,
    ANSWER_GRAMMAR,
    NO_OPTION,
    arguments_grammar,
    call_prefix,
    choice_grammar,
    option_grammar,
    optional_parameters,
)
from retinue.llm.local import render_tools
from retinue.subagents.tools import subagent_tools
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.memory import memory_tools

pytest.importorskip("llama_cpp")

from retinue.llm._local_engine import grammar_parses  # (needs llama_cpp)

GrammarAccepts = Callable[[str, str], bool]  # the conftest's grammar_accepts fixture

END = "}\n</tool_call>"  # what closes the call after its arguments


@pytest.fixture
def parses(vocab_model: Any) -> Any:
    return lambda source: grammar_parses(vocab_model, source)


def function(name: str, parameters: dict[str, object]) -> dict[str, object]:
    return {"name": name, "parameters": parameters}


def test_the_choice_is_one_word_answer_or_an_offered_tool(parses: Any) -> None:
    source = choice_grammar(["Read", "mcp__db__query"])
    assert source == f'root ::= "{ANSWER}" | "Read" | "mcp__db__query"'
    assert parses(source)


@pytest.mark.parametrize("small_model", [False, True])
def test_every_builtin_tool_gives_an_arguments_grammar_llama_cpp_accepts(
    small_model: bool, parses: Any
) -> None:
    tools = [*builtin_tools(), *subagent_tools(), *memory_tools()]
    for rendered in render_tools([t.spec for t in tools], small_model=small_model):
        source = arguments_grammar(rendered["function"])
        assert source.startswith('root ::= rt-args "}\\n</tool_call>"')
        assert parses(source), rendered["function"]["name"]


def test_the_call_prefix_and_the_arguments_make_the_models_own_call_format() -> None:
    assert call_prefix("Read") == '<tool_call>\n{"name": "Read", "arguments": '


def test_parameters_named_like_annotations_are_kept_and_refs_inlined(parses: Any) -> None:
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


def test_a_recursive_schema_still_gives_a_grammar(parses: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
    }
    assert parses(arguments_grammar(function("Tree", schema)))


def test_answers_may_not_open_a_tag_nor_start_blank_or_as_json(parses: Any) -> None:
    assert parses(ANSWER_GRAMMAR)
    first = next(line for line in ANSWER_GRAMMAR.splitlines() if line.startswith("rt-first ::="))
    assert "[^<{`\\x00 \\t\\r\\n]" in first and '"```" [^j`\\x00]' in first
    assert 'rt-char ::= [^<\\x00] | "<" [^t\\x00]' in ANSWER_GRAMMAR


def test_llama_cpps_parser_is_really_consulted(parses: Any) -> None:
    assert not parses("root ::= (")
    assert not parses('root ::= undefined-rule "x"')


OPTIONAL = {
    "type": "object",
    "properties": {
        "verbose": {"type": "boolean", "description": "optional, listed first"},
        "name": {"type": "string", "description": "required"},
        "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "size": {"type": "integer"},
    },
    "required": ["name", "size"],
}


@pytest.mark.parametrize(
    "arguments",
    [
        '{"name": "a", "size": 1}',
        '{"name":"a","size":1}',
        '{"name": "a", "size": 1, "verbose": true}',
        '{"name": "a", "size": 1, "count": 3}',
        '{"name": "a", "size": 1, "count": null}',
        '{"name": "a", "size": 1, "verbose": false, "count": 2}',
    ],
)
def test_optional_parameters_may_be_left_out_or_given_after_the_required_ones(
    grammar_accepts: GrammarAccepts, arguments: str
) -> None:
    source = arguments_grammar(function("Make", OPTIONAL))
    assert grammar_accepts(source, arguments + END)


@pytest.mark.parametrize(
    "arguments",
    [
        '{"size": 1}',  # a required one missing
        '{"name": "a"}',
        '{"verbose": true, "name": "a", "size": 1}',  # an optional one before the required
        '{"size": 1, "name": "a"}',  # required ones in another order than the schema's
        '{"name": "a", "size": 1, "colour": "red"}',  # not a parameter
        '{"name": "a", "size": "1"}',  # wrong type
        '{"name": "a", "size": 1, "verbose": true, "verbose": true}',  # twice
        '{"name": "a", "size": 1,}',  # started an optional one and gave none
    ],
)
def test_wrong_arguments_cannot_be_generated(
    grammar_accepts: GrammarAccepts, arguments: str
) -> None:
    source = arguments_grammar(function("Make", OPTIONAL))
    assert not grammar_accepts(source, arguments + END)


def test_a_call_must_be_closed(grammar_accepts: GrammarAccepts) -> None:
    source = arguments_grammar(function("Make", OPTIONAL))
    assert not grammar_accepts(source, '{"name": "a", "size": 1}')
    assert not grammar_accepts(source, '{"name": "a", "size": 1}}\n</tool_call> more')


def _minimal(schema: dict[str, Any]) -> Any:
    """The smallest value of a simple schema: only its required properties, first choices."""
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return _minimal(schema["anyOf"][0])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _minimal(props[name]) for name in schema.get("required", [])}
    return {"string": "x", "integer": 1, "number": 1, "boolean": False}[str(kind)]


SMALL_MODEL_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "SubAgent", "UnloadSubAgent")


@pytest.mark.parametrize("small_model", [False, True])
def test_every_tool_a_small_model_is_offered_may_be_called_with_its_required_arguments_alone(
    grammar_accepts: GrammarAccepts, small_model: bool
) -> None:
    tools = [t.spec for t in (*builtin_tools(), *subagent_tools()) if t.name in SMALL_MODEL_TOOLS]
    assert len(tools) == len(SMALL_MODEL_TOOLS)
    for rendered in render_tools(tools, small_model=small_model):
        fn = rendered["function"]
        arguments = _minimal(fn["parameters"])
        assert set(arguments) == set(fn["parameters"].get("required", [])), fn["name"]
        source = arguments_grammar(fn)
        assert grammar_accepts(source, json.dumps(arguments) + END), fn["name"]
        assert not grammar_accepts(source, json.dumps({**arguments, "zzz": 1}) + END)


def test_arguments_llama_cpp_refuses_fall_back_to_any_json_object(
    vocab_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retinue.errors import ModelError
    from retinue.llm import _local_engine

    real = _local_engine.arguments_grammar
    monkeypatch.setattr(
        _local_engine,
        "arguments_grammar",
        lambda f, given=None: "root ::= (" if f.get("parameters") else real(f, given),
    )
    engine = object.__new__(_local_engine.Engine)  # only the vocabulary: no weights loaded
    engine.llm, engine._grammars = vocab_model, {}
    with pytest.raises(ModelError, match=r"llama\.cpp rejected it"):
        engine._grammar("root ::= (")
    grammar = engine._arguments_grammar(function("Make", OPTIONAL))
    assert grammar._grammar == real({"name": "Make", "parameters": None})


def test_the_optional_parameters_are_a_one_word_choice_with_none_first(parses: Any) -> None:
    assert optional_parameters(function("Make", OPTIONAL)) == ["verbose", "count"]
    source = option_grammar(["verbose", "count"])
    assert source == f'root ::= "{NO_OPTION}" | "verbose" | "count"'
    assert parses(source)


def test_only_the_chosen_optional_parameter_can_be_written_and_then_must_be(
    grammar_accepts: GrammarAccepts,
) -> None:
    none = arguments_grammar(function("Make", OPTIONAL), ())
    assert grammar_accepts(none, '{"name": "a", "size": 1}' + END)
    assert not grammar_accepts(none, '{"name": "a", "size": 1, "verbose": true}' + END)
    count = arguments_grammar(function("Make", OPTIONAL), ("count",))
    assert grammar_accepts(count, '{"name": "a", "size": 1, "count": 2}' + END)
    assert not grammar_accepts(count, '{"name": "a", "size": 1}' + END)
    assert not grammar_accepts(count, '{"name": "a", "size": 1, "verbose": true}' + END)
    assert not grammar_accepts(count, '{"count": 2, "name": "a", "size": 1}' + END)


def test_a_tool_without_required_parameters_may_be_called_with_none(
    grammar_accepts: GrammarAccepts,
) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    assert grammar_accepts(arguments_grammar(function("LS", schema), ()), "{}" + END)
    assert not grammar_accepts(arguments_grammar(function("LS", schema), ()), '{"path": "a"}' + END)
