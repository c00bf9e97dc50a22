"""Read, Write and Edit through the registry: happy paths and the errors the model sees."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from retinue.messages import ToolCall, ToolResultMessage
from retinue.tools import ToolContext, ToolRegistry

Call = Callable[..., Awaitable[ToolResultMessage]]


async def test_read_numbers_lines_like_cat_n(call: Call, ws: Path) -> None:
    (ws / "a.txt").write_text("first\nsecond\n")
    result = await call("Read", file_path="a.txt")
    assert not result.is_error
    assert result.content == "     1\tfirst\n     2\tsecond"


async def test_read_offset_and_limit(call: Call, ws: Path) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await call("Read", file_path=str(ws / "n.txt"), offset=4, limit=2)
    lines = result.content.splitlines()
    assert lines[:2] == ["     4\tline 4", "     5\tline 5"]
    assert "offset=6" in lines[2]


async def test_read_default_cap_and_long_lines(call: Call, ws: Path) -> None:
    (ws / "big.txt").write_text("x" * 5000 + "\n" + "y\n" * 2500)
    result = await call("Read", file_path="big.txt")
    lines = result.content.splitlines()
    assert len(lines) == 2001  # 2000 numbered lines + the "file continues" note
    assert lines[-1].startswith("(file continues")
    assert "line truncated, 5000 characters" in lines[0]
    assert len(lines[0]) < 2100


async def test_read_empty_and_past_the_end(call: Call, ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    (ws / "one.txt").write_text("only\n")
    assert "empty" in (await call("Read", file_path="empty.txt")).content
    past = await call("Read", file_path="one.txt", offset=5)
    assert not past.is_error
    assert "fewer than 5 lines" in past.content


async def test_read_errors(call: Call, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    cases = {"sub": "is a directory", "blob.bin": "binary", "nope.txt": "does not exist"}
    for path, expected in cases.items():
        result = await call("Read", file_path=path)
        assert result.is_error
        assert result.content.startswith("Error: ")
        assert expected in result.content


async def test_read_rejects_bad_arguments(call: Call) -> None:
    result = await call("Read", path="a.txt")
    assert result.is_error
    assert "file_path" in result.content


async def test_write_creates_parents_and_overwrites(call: Call, ws: Path) -> None:
    first = await call("Write", file_path="deep/er/new.txt", content="hello\n")
    assert not first.is_error
    assert first.content.startswith("Created deep/er/new.txt")
    assert (ws / "deep/er/new.txt").read_text() == "hello\n"
    second = await call("Write", file_path="deep/er/new.txt", content="bye")
    assert second.content.startswith("Updated")
    assert (ws / "deep/er/new.txt").read_text() == "bye"


async def test_write_to_a_directory_is_an_error(call: Call, ws: Path) -> None:
    (ws / "d").mkdir()
    result = await call("Write", file_path="d", content="x")
    assert result.is_error
    assert "directory" in result.content


async def test_edit_replaces_a_unique_string(call: Call, ws: Path) -> None:
    (ws / "c.py").write_text("a = 1\nb = 2\n")
    result = await call("Edit", file_path="c.py", old_string="b = 2", new_string="b = 3")
    assert not result.is_error
    assert (ws / "c.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_refuses_ambiguous_then_replace_all(call: Call, ws: Path) -> None:
    (ws / "c.py").write_text("x\nx\nx\n")
    ambiguous = await call("Edit", file_path="c.py", old_string="x", new_string="y")
    assert ambiguous.is_error
    assert "3 times" in ambiguous.content
    assert (ws / "c.py").read_text() == "x\nx\nx\n"
    every = await call("Edit", file_path="c.py", old_string="x", new_string="y", replace_all=True)
    assert not every.is_error
    assert "3 occurrences" in every.content
    assert (ws / "c.py").read_text() == "y\ny\ny\n"


async def test_edit_errors(call: Call, ws: Path) -> None:
    (ws / "c.py").write_text("hello\n")
    missing = await call("Edit", file_path="c.py", old_string="bye", new_string="x")
    assert missing.is_error
    assert "not found" in missing.content
    same = await call("Edit", file_path="c.py", old_string="hello", new_string="hello")
    assert same.is_error
    assert "same" in same.content
    no_file = await call("Edit", file_path="nope.py", old_string="a", new_string="b")
    assert no_file.is_error
    assert "does not exist" in no_file.content
    assert (ws / "c.py").read_text() == "hello\n"


async def test_edit_with_empty_old_string_creates_a_file_only(call: Call, ws: Path) -> None:
    created = await call("Edit", file_path="new/f.txt", old_string="", new_string="body")
    assert not created.is_error
    assert (ws / "new/f.txt").read_text() == "body"
    again = await call("Edit", file_path="new/f.txt", old_string="", new_string="other")
    assert again.is_error
    assert (ws / "new/f.txt").read_text() == "body"


async def test_edit_keeps_crlf_line_endings(call: Call, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await call("Edit", file_path="w.txt", old_string="two", new_string="2")
    assert not result.is_error
    assert (ws / "w.txt").read_bytes() == b"one\r\n2\r\n"


async def test_write_refuses_to_replace_a_file_it_has_not_read(call: Call, ws: Path) -> None:
    (ws / "data.csv").write_text("a,b\n1,2\n")
    blind = await call("Write", file_path="data.csv", content="hello")
    assert blind.is_error
    assert "you have not read it" in blind.content and "Read it first" in blind.content
    assert (ws / "data.csv").read_text() == "a,b\n1,2\n"  # nothing the user had is lost
    assert not (await call("Read", file_path="data.csv")).is_error
    after_read = await call("Write", file_path="data.csv", content="hello")
    assert after_read.content.startswith("Updated")
    assert (ws / "data.csv").read_text() == "hello"


async def test_write_refuses_a_file_changed_since_it_was_read(call: Call, ws: Path) -> None:
    target = ws / "notes.txt"
    target.write_text("v1\n")
    await call("Read", file_path="notes.txt")
    target.write_text("v2, written by someone else\n")
    stale = await call("Write", file_path="notes.txt", content="mine")
    assert stale.is_error and "changed since you read it" in stale.content
    assert target.read_text() == "v2, written by someone else\n"


async def test_what_an_agent_wrote_or_edited_it_may_write_again(call: Call, ws: Path) -> None:
    (ws / "empty.txt").write_text("")  # nothing to lose: no Read needed
    assert not (await call("Write", file_path="empty.txt", content="one")).is_error
    assert not (await call("Write", file_path="empty.txt", content="two")).is_error
    (ws / "e.txt").write_text("x = 1\n")
    assert not (await call("Edit", file_path="e.txt", old_string="1", new_string="2")).is_error
    assert not (await call("Write", file_path="e.txt", content="x = 3\n")).is_error
    assert (ws / "e.txt").read_text() == "x = 3\n"


async def test_one_agents_read_does_not_let_another_write(
    call: Call, registry: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    (ws / "shared.txt").write_text("keep me\n")
    await call("Read", file_path="shared.txt")
    other = replace(ctx, agent_id="agent-2")
    arguments = json.dumps({"file_path": "shared.txt", "content": "overwritten"})
    result = await registry.execute(ToolCall("call-2", "Write", arguments), other)
    assert result.is_error and "you have not read it" in result.content
    assert (ws / "shared.txt").read_text() == "keep me\n"


async def test_a_binary_file_it_tried_to_read_may_be_replaced(call: Call, ws: Path) -> None:
    """Read refuses a binary file, but the agent has seen it is there: Write may replace it
    (otherwise a corrupted file could never be regenerated)."""
    (ws / "out.json").write_bytes(b'{"a": 1\x00}')
    assert (await call("Write", file_path="out.json", content="{}")).is_error
    refused = await call("Read", file_path="out.json")
    assert refused.is_error and "binary" in refused.content
    assert not (await call("Write", file_path="out.json", content="{}")).is_error
    assert (ws / "out.json").read_text() == "{}"
