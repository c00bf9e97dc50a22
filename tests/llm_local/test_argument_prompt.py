"""What the embedded model reads before it writes a call's arguments (issue 25, item 5).

A 0.5B model copied what it had just read into the values: ``path/to/file.json``, "full
content to write to the file", a description's example glob, a session name taken from the
request. So the descriptions hold no sample values, the small-model schema keeps only the first
clause of a required parameter's description, and the arguments prompt lists the required
parameters first, the optional ones by name only, and ends with the user's own request.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retinue.llm.base import ToolSpec
from retinue.llm.local import render_tools
from retinue.subagents.tools import subagent_tools
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.memory import memory_tools

SAMPLES = re.compile(r"\be\.g\.|\bfor example\b|\bsuch as\b|path/to/", re.IGNORECASE)
OWN_TOOLS = (  # their descriptions are written with the small model in mind
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "LS",
    "Glob",
    "Grep",
    "SubAgent",
    "UnloadSubAgent",
    "SubAgentStatus",
    "FindRole",
)


def _all_specs() -> list[ToolSpec]:
    return [t.spec for t in (*builtin_tools(), *subagent_tools(), *memory_tools())]


def _descriptions(node: Any) -> list[str]:
    """Every ``description`` in a JSON schema, nested ones and ``$defs`` included."""
    if isinstance(node, list):
        return [d for item in node for d in _descriptions(item)]
    if not isinstance(node, dict):
        return []
    found = [node["description"]] if isinstance(node.get("description"), str) else []
    return found + [d for value in node.values() for d in _descriptions(value)]


def test_no_tool_description_holds_a_placeholder_path() -> None:
    for spec in _all_specs():
        for text in [spec.description, *_descriptions(spec.parameters)]:
            assert "path/to/" not in text.lower(), (spec.name, text)


def test_the_file_search_and_subagent_tools_describe_parameters_without_sample_values() -> None:
    specs = {s.name: s for s in _all_specs()}
    assert set(OWN_TOOLS) <= set(specs)
    for name in OWN_TOOLS:
        for text in _descriptions(specs[name].parameters):
            assert not SAMPLES.search(text), (name, text)
    write = specs["Write"].parameters["properties"]["content"]["description"]
    assert "content to write" not in write.lower()


def test_small_model_schemas_put_required_parameters_first_and_drop_examples_and_asides() -> None:
    schema = {
        "type": "object",
        "properties": {
            "verbose": {"type": "boolean", "description": "Say more."},
            "pattern": {
                "type": "string",
                "description": 'Glob pattern (shell style), e.g. "**/*.py"; or a name',
            },
            "url": {"type": "string", "description": "The http(s) URL to fetch"},
        },
        "required": ["url", "pattern"],
    }
    [tool] = render_tools([ToolSpec("Find", "Find things.", schema)], small_model=True)
    params = tool["function"]["parameters"]
    assert list(params["properties"]) == ["url", "pattern", "verbose"]
    assert params["properties"]["pattern"]["description"] == "Glob pattern"
    assert params["properties"]["url"]["description"] == "The http(s) URL to fetch"
    assert "description" not in params["properties"]["verbose"]


# -- the arguments prompt (built in the worker's engine module, which imports llama_cpp) --------


@pytest.fixture
def engine() -> Any:
    pytest.importorskip("llama_cpp")
    from retinue.llm import _local_engine

    return _local_engine


def _compact(name: str) -> dict[str, Any]:
    spec = next(s for s in _all_specs() if s.name == name)
    [tool] = render_tools([spec], small_model=True)
    return tool["function"]


REQUEST_WORDS = (
    "Open an interactive session with the researcher and tell it: the codename is BLUEFIN."
)
REQUEST = [
    {"role": "system", "content": "You help."},
    {
        "role": "user",
        "content": "Open an interactive session with the researcher and tell it: the "
        "codename is BLUEFIN.\n\nCurrent content of notes.txt:\n```\nsecret\n```",
    },
]


def test_the_arguments_prompt_lists_the_required_parameters_and_the_chosen_optional_one(
    engine: Any,
) -> None:
    prompt = engine._arguments_prompt(_compact("SubAgent"), REQUEST)
    lines = prompt.splitlines()
    assert lines[0] == "Call SubAgent now. Its arguments are one JSON object:"
    assert lines[1].startswith('- "task" (string) - ')
    assert lines[2].startswith('- "role" (string) - ')
    assert lines[3] == "Take the values from the request and the conversation, not from this list."
    assert "interactive" not in prompt.replace(REQUEST_WORDS, "")  # an optional one, not given
    assert lines[-1] == f"The request: {REQUEST_WORDS}"  # not the file content appended
    given = engine._arguments_prompt(_compact("SubAgent"), REQUEST, ("interactive",))
    assert given.splitlines()[3] == '- "interactive" (boolean)'


def test_the_option_question_lists_the_optional_parameters_with_none_first(
    engine: Any,
) -> None:
    function = _compact("SubAgent")
    optional = ["interactive", "instance", "background", "steer"]
    prompt = engine._options_prompt(function, optional, REQUEST)
    assert prompt.splitlines()[0] == (
        "Before you call SubAgent: does the request need one of its optional arguments "
        '"interactive" (boolean), "instance" (string), "background" (boolean), "steer" '
        "(boolean)? Reply with one word: none (the usual answer), or the name of the one it "
        "needs."
    )
    assert prompt.splitlines()[1] == f"The request: {REQUEST_WORDS}"


def test_an_enum_is_shown_as_its_choices(engine: Any) -> None:
    function = {
        "name": "UnloadSubAgent",
        "parameters": {
            "type": "object",
            "properties": {"role": {"type": "string", "enum": ["researcher", "tester"]}},
            "required": ["role"],
        },
    }
    prompt = engine._arguments_prompt(function, REQUEST)
    assert '- "role" (one of "researcher", "tester")' in prompt


def test_nothing_the_model_reads_before_arguments_offers_a_sample_value(engine: Any) -> None:
    for rendered in render_tools(_all_specs(), small_model=True):
        function = rendered["function"]
        optional = engine.optional_parameters(function)
        prompt = engine._arguments_prompt(function, REQUEST, tuple(optional))
        assert not SAMPLES.search(prompt), prompt
        assert not SAMPLES.search(engine._options_prompt(function, optional, REQUEST))
        assert "{" not in prompt, prompt  # no JSON schema to imitate


def test_after_tool_results_no_request_is_repeated(engine: Any) -> None:
    results = [*REQUEST, {"role": "user", "content": "<tool_response>\n5\n</tool_response>"}]
    assert engine._last_request(results) == ""
    long = [{"role": "user", "content": "word " * 500}]
    assert len(engine._last_request(long)) == 400
    assert json.dumps(engine._last_request([])) == '""'
