"""Reading tool calls out of a local model's text, and hiding them from the text stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retinue.llm._tool_text import (
    MALFORMED_NAME,
    ToolCallStreamFilter,
    described_calls,
    is_fenced_call,
    parse_tool_calls,
    shell_calls,
)
from retinue.tools import ToolContext, ToolRegistry, tool


def args(raw: str) -> object:
    return json.loads(raw)


def test_tagged_call_is_parsed_and_removed_from_content() -> None:
    text = 'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me add."
    assert [(c.name, args(c.arguments)) for c in calls] == [("add", {"a": 2, "b": 3})]
    assert calls[0].id.startswith("call_")


def test_several_tagged_calls_get_distinct_ids() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
    )
    content, calls = parse_tool_calls(text)
    assert content == ""
    assert [c.name for c in calls] == ["a", "b"]
    assert calls[0].id != calls[1].id


def test_unterminated_tag_at_end_still_counts() -> None:
    _, calls = parse_tool_calls('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 1}}\n')
    assert [c.name for c in calls] == ["add"]


def test_fenced_json_block_is_a_call() -> None:
    text = (
        "I'll delegate this.\n```json\n"
        '{"name": "SubAgent", "arguments": {"task": "review", "role": "reviewer"}}\n```\nDone.'
    )
    content, calls = parse_tool_calls(text)
    assert [(c.name, args(c.arguments)) for c in calls] == [
        ("SubAgent", {"task": "review", "role": "reviewer"})
    ]
    assert "SubAgent" not in content
    assert content.startswith("I'll delegate this.") and content.endswith("Done.")


def test_fenced_block_with_a_list_and_parameters_alias() -> None:
    text = '```\n[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "arguments": "{}"}]\n```'
    _, calls = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [("a", '{"x": 1}'), ("b", "{}")]


def test_bare_json_reply_is_a_call() -> None:
    _, calls = parse_tool_calls('  {"name": "get_weather", "arguments": {"city": "Oslo"}}  ')
    assert [(c.name, args(c.arguments)) for c in calls] == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 5.",
        '```json\n{"city": "Oslo", "temp": 3}\n```',
        '```python\nprint({"name": 1})\n```',
        '{"result": 5}',
    ],
)
def test_plain_text_and_ordinary_code_are_not_calls(text: str) -> None:
    content, calls = parse_tool_calls(text)
    assert calls == ()
    assert content == text.strip()


def test_broken_tagged_json_becomes_a_call_with_raw_arguments() -> None:
    raw = '{"name": "add", "arguments": {"a": 2, "b": }'
    _, calls = parse_tool_calls(f"<tool_call>{raw}</tool_call>")
    assert [(c.name, c.arguments) for c in calls] == [("add", raw)]
    with pytest.raises(json.JSONDecodeError):
        json.loads(calls[0].arguments)


def test_tagged_text_without_a_name_is_a_malformed_call() -> None:
    _, calls = parse_tool_calls("<tool_call>add 2 and 3</tool_call>")
    assert [(c.name, c.arguments) for c in calls] == [(MALFORMED_NAME, "add 2 and 3")]


def test_broken_fenced_call_is_passed_on_not_dropped() -> None:
    raw = '{"name": "add", "arguments": {"a": 2, "b": 3}'
    content, calls = parse_tool_calls(f"```json\n{raw}\n```")
    assert [(c.name, c.arguments) for c in calls] == [("add", raw)]
    assert content == ""


def test_trailing_garbage_after_the_object_is_ignored() -> None:
    _, calls = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}}</tool_call>')
    assert [(c.name, c.arguments) for c in calls] == [("a", "{}")]


def feed_all(deltas: list[str], *, found_calls: bool = True) -> str:
    f = ToolCallStreamFilter()
    return "".join(f.feed(d) for d in deltas) + f.flush(found_calls=found_calls)


def test_stream_filter_hides_tags_split_across_deltas() -> None:
    deltas = ["Sure", ". <tool", '_call>{"name"', ': "a"}</tool_', "call> ok"]
    assert feed_all(deltas) == "Sure.  ok"


def test_stream_filter_releases_a_false_start() -> None:
    assert feed_all(["a <tool", "box> b", " <"], found_calls=False) == "a <toolbox> b <"


def test_stream_filter_drops_an_unterminated_call() -> None:
    assert feed_all(["x<tool_call>{", '"name": "a"']) == "x"


def test_json_lines_are_several_calls_and_exact_repeats_count_once() -> None:
    text = (
        '{"name": "w", "arguments": {"city": "Oslo"}}\n'
        '{"name": "w", "arguments": {"city": "Paris"}}\n'
        '{"name": "w", "arguments": {"city": "Oslo"}}\n'
        '{"name": "w", "arguments": {"ci'
    )
    _, calls = parse_tool_calls(text)
    assert [args(c.arguments) for c in calls] == [{"city": "Oslo"}, {"city": "Paris"}]


def test_stream_filter_holds_a_bare_json_reply_until_the_end() -> None:
    deltas = ["  ", '{"name"', ': "a", "arguments": {}}']
    assert feed_all(deltas, found_calls=True) == ""
    assert feed_all(['{"result"', ": 5}"], found_calls=False) == '{"result": 5}'


def test_stream_filter_streams_ordinary_text_at_once() -> None:
    f = ToolCallStreamFilter()
    assert f.feed("Hello") == "Hello"
    assert f.feed(" world") == " world"


async def test_a_malformed_call_becomes_an_error_result_the_model_can_read(tmp_path: Path) -> None:
    @tool()
    def add(ctx: ToolContext, a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    registry = ToolRegistry([add])
    ctx = ToolContext(agent_id="main", workspace=tmp_path, data_dir=tmp_path)
    _, broken = parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 2,}}</tool_call>')
    _, nameless = parse_tool_calls("<tool_call>please add 2 and 3</tool_call>")
    first = await registry.execute(broken[0], ctx)
    second = await registry.execute(nameless[0], ctx)
    assert first.is_error and "not valid JSON" in first.content
    assert second.is_error and "available tools: add" in second.content


def test_constrained_replies_are_calls_only_when_they_start_as_one() -> None:
    call = '{"name": "Read", "arguments": {"file_path": "a.py"}}'
    answer = f"Here is the call I would make:\n```json\n{call}\n```"
    assert parse_tool_calls(answer, constrained=True) == (answer, ())
    for text in (f"<tool_call>\n{call}\n</tool_call>", call, f"```json\n{call}\n```"):
        content, calls = parse_tool_calls(text, constrained=True)
        assert content == "" and [c.name for c in calls] == ["Read"], text


# -- calls described in a code block instead of made (the native format) -------------------

SCHEMAS = {
    "Glob": {"properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}},
    "Read": {"properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}}},
    "Grep": {"properties": {"pattern": {"type": "string"}, "-i": {"type": "boolean"}}},
}


def test_a_call_described_in_a_fenced_block_is_read_as_that_call() -> None:
    text = (
        "To list the files, use the `Glob` function. Here is the command:\n\n"
        '```bash\nGlob pattern="*" path="/tmp/ws"\n```\n\nThis returns every file.'
    )
    content, calls = described_calls(text, SCHEMAS)
    assert [(c.name, args(c.arguments)) for c in calls] == [
        ("Glob", {"pattern": "*", "path": "/tmp/ws"})
    ]
    assert "```" not in content and content.startswith("To list the files")


def test_call_syntax_single_quotes_and_schema_types_are_read() -> None:
    text = "```\nRead(file_path='notes/a b.txt', limit=20)\nGlob pattern=*.py\n```"
    _, calls = described_calls(text, SCHEMAS)
    assert [(c.name, args(c.arguments)) for c in calls] == [
        ("Read", {"file_path": "notes/a b.txt", "limit": 20}),
        ("Glob", {"pattern": "*.py"}),
    ]


@pytest.mark.parametrize(
    "block",
    [
        "ls -la /tmp/ws",  # not an offered tool
        'Glob pattern="*" recursive=true',  # a parameter the tool does not have
        'Glob pattern="*"\nthen look at the output',  # a line that is not a call
        "Glob",  # a bare word
        'Bash command="ls"',  # not offered
        'Glob pattern="*',  # an unterminated string
    ],
)
def test_a_block_that_is_not_only_offered_calls_stays_text(block: str) -> None:
    text = f"Try this:\n```sh\n{block}\n```"
    assert described_calls(text, SCHEMAS) == (text, ())


def test_text_without_a_fenced_block_is_never_a_described_call() -> None:
    text = 'Use Glob pattern="*" to list them.'
    assert described_calls(text, SCHEMAS) == (text, ())


def test_an_overlong_block_is_not_read_as_described_calls() -> None:
    line = 'Glob pattern="*.py" path="src"\n'
    text = "```\n" + line * 80 + "```"  # 2,480 characters of calls
    assert described_calls(text, SCHEMAS) == (text, ())
    repeated = described_calls("```\n" + line * 10 + "```", SCHEMAS)[1]
    assert len(repeated) == 1  # a degenerate repetition is one call
    lines = "".join(f'Glob pattern="{i}.py"\n' for i in range(10))
    assert len(described_calls(f"```\n{lines}```", SCHEMAS)[1]) == 10


# -- issue 41: a fenced call is hidden from the stream ---------------------------------------

CALL = '{"name": "Glob", "arguments": {"pattern": "*"}}'


def test_stream_filter_hides_a_reply_that_starts_as_a_json_fence() -> None:
    # the native format stops such a reply where it opens and writes the call as a tag
    deltas = ["``", "`j", "son\n", "<tool_call>\n", CALL, "\n</tool_call>"]
    assert feed_all(deltas) == ""
    assert feed_all(["```json\n", '{"city": "Oslo"}\n```'], found_calls=False) == (
        '```json\n{"city": "Oslo"}\n```'
    )


def test_stream_filter_hides_a_fenced_call_inside_a_reply() -> None:
    deltas = ["Let me look.\n`", "``json\n", CALL[:20], CALL[20:], "\n``", "`\nDone."]
    assert feed_all(deltas) == "Let me look.\n\nDone."


def test_stream_filter_shows_an_ordinary_code_block_once_it_closes() -> None:
    f = ToolCallStreamFilter()
    assert f.feed("Here:\n```python\nprint(1)\n") == "Here:\n"  # held while open
    assert f.feed("```\nok ``") == "```python\nprint(1)\n```\nok "
    assert f.flush(found_calls=False) == "``"
    assert feed_all(["```python\nprint(", "1)\n```"], found_calls=False) == (
        "```python\nprint(1)\n```"
    )


def test_stream_filter_hides_what_its_test_reads_as_a_call() -> None:
    f = ToolCallStreamFilter(lambda block: bool(shell_calls(block, BASH)[1]))
    shown = f.feed("Run this:\n```bash\nls -la\n```\n") + f.flush(found_calls=True)
    assert shown == "Run this:\n\n"


def test_is_fenced_call_reads_only_json_calls() -> None:
    assert is_fenced_call(f"```json\n{CALL}\n```")
    assert not is_fenced_call('```json\n{"city": "Oslo"}\n```')
    assert not is_fenced_call("```bash\nls\n```")


# -- issue 41: code as action: a fenced shell block is a Bash call ---------------------------

BASH = {
    **SCHEMAS,
    "Bash": {"properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}},
}


def test_a_bash_block_is_read_as_one_bash_call() -> None:
    text = "To list the files, run:\n\n```bash\nls -la\n```\n\nThis shows every file."
    content, calls = shell_calls(text, BASH)
    assert [(c.name, args(c.arguments)) for c in calls] == [("Bash", {"command": "ls -la"})]
    assert "```" not in content and content.startswith("To list the files")


@pytest.mark.parametrize(
    ("block", "command"),
    [
        ("```sh\nls\nwc -l *.py\n```", "ls\nwc -l *.py"),
        ("```shell\n# list them\nls\n```", "# list them\nls"),
        ("```console\n$ ls\na.py  b.py\n$ cat a.py\nprint(1)\n```", "ls\ncat a.py"),
        ("```bash\n$ ls -a\n.  ..  a.py\n```", "ls -a"),  # prompts: the rest is output
        ("```Bash\nls\n```", "ls"),
    ],
)
def test_shell_blocks_and_prompts(block: str, command: str) -> None:
    _, calls = shell_calls(block, BASH)
    assert [args(c.arguments) for c in calls] == [{"command": command}]


def test_several_blocks_are_one_call_in_order_and_a_repeat_counts_once() -> None:
    text = "```bash\nmkdir out\n```\nthen\n```bash\nls out\n```\n```bash\nmkdir out\n```"
    content, calls = shell_calls(text, BASH)
    assert [args(c.arguments) for c in calls] == [{"command": "mkdir out\nls out"}]
    assert content == "then"


@pytest.mark.parametrize(
    "text",
    [
        "```python\nimport os\nprint(os.listdir())\n```",  # not a shell block
        "```console\na.py  b.py\n```",  # output only, no prompt
        "```bash\n# nothing to run\n```",  # comments only
        "```bash\nls -la",  # never closed (generation stopped inside it)
        "Run `ls` to see them.",  # no block
        "```bash\n" + "echo x\n" * 400 + "```",  # over the size bound
    ],
)
def test_what_is_not_a_shell_call_stays_text(text: str) -> None:
    assert shell_calls(text, BASH) == (text.strip(), ())


def test_no_bash_call_unless_bash_is_offered() -> None:
    text = "```bash\nls\n```"
    assert shell_calls(text, SCHEMAS) == (text, ())
    assert shell_calls(text, {"Bash": {"properties": {"cmd": {}}}}) == (text, ())


# -- issue 41: a tool written as a command line in a shell block ------------------------------


def _builtin_schemas() -> dict[str, dict[str, object]]:
    from retinue.tools.builtin import builtin_tools

    return {t.name: t.spec.parameters for t in builtin_tools()}


@pytest.mark.parametrize(
    ("line", "call"),
    [
        (
            'Grep -i "SECRET_CODE" settings.py',
            ("Grep", {"-i": True, "pattern": "SECRET_CODE", "path": "settings.py"}),
        ),
        (
            "Grep -n -A 2 --output_mode content TODO src",
            (
                "Grep",
                {"-n": True, "-A": 2, "output_mode": "content", "pattern": "TODO", "path": "src"},
            ),
        ),
        ("Read settings.py --limit 20", ("Read", {"file_path": "settings.py", "limit": 20})),
        ("Glob '*.py'", ("Glob", {"pattern": "*.py"})),
    ],
)
def test_a_tool_written_as_a_command_line_is_read_as_its_call(
    line: str, call: tuple[str, object]
) -> None:
    text = f"To find it, run:\n\n```bash\n{line}\n```"
    content, calls = described_calls(text, _builtin_schemas())
    assert [(c.name, args(c.arguments)) for c in calls] == [call]
    assert content == "To find it, run:"


@pytest.mark.parametrize(
    "line",
    [
        "Grep -z SECRET settings.py",  # a flag Grep does not have
        "Grep -i -i SECRET settings.py",  # a flag given twice
        "Grep SECRET settings.py --glob",  # a flag without its value
        "Read the file settings.py",  # more words than Read's parameters take
        "Grep 'SECRET settings.py",  # an unterminated quote
        'Glob pattern="*" recursive=true',  # a keyword the tool does not have
        "grep -i SECRET settings.py",  # the shell's grep, not the tool
    ],
)
def test_a_command_line_that_is_not_the_tool_call_stays_a_shell_command(line: str) -> None:
    text = f"```bash\n{line}\n```"
    schemas = _builtin_schemas()
    assert described_calls(text, schemas) == (text, ())
    _, calls = shell_calls(text, schemas)
    assert [(c.name, args(c.arguments)) for c in calls] == [("Bash", {"command": line})]


# -- a JSON call in another language's fence (the default model, without a sandbox) ----------


def test_a_json_call_in_a_python_fence_is_that_call() -> None:
    text = '```python\n{\n  "name": "Read",\n  "arguments": {"file_path": "settings.py"}\n}\n```'
    content, calls = parse_tool_calls(text)
    assert [(c.name, args(c.arguments)) for c in calls] == [("Read", {"file_path": "settings.py"})]
    assert content == ""


def test_a_shell_line_is_not_taken_for_a_fence_s_language() -> None:
    text = '```bash\nls\nGlob pattern="*"\n```'  # ls is a command: the block is the shell's
    assert described_calls(text, SCHEMAS) == (text, ())
    _, calls = shell_calls(text, BASH)
    assert [args(c.arguments) for c in calls] == [{"command": 'ls\nGlob pattern="*"'}]
