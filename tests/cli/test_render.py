"""Terminal plumbing: progress and log lines start on lines of their own, escaped; a
finished model call shows its token counts; names print as written (no markup, no emoji)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from retinue.cli.memory import memory_app
from retinue.cli.render import EventPrinter
from retinue.cli.term import LineDiscipline, route_logs
from retinue.events import MODEL_CALLED, TOOL_STARTED, Event


def test_progress_and_log_lines_start_on_their_own_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    lines = LineDiscipline(out)
    console = Console(file=err, emoji=False, highlight=False, width=200)
    printer = EventPrinter(console)
    printer.before_line = lines.end_line
    route_logs(console, lines.end_line)
    try:
        lines.text("Looking at it")
        printer(Event(TOOL_STARTED, "main", {"name": "Read", "arguments": "{}"}))
        assert out.getvalue() == "Looking at it\n"
        lines.text("still going")
        logging.getLogger("retinue.memory").warning("consolidation of [b]x[/b] :b: failed")
        assert out.getvalue().endswith("still going\n")
        assert "consolidation of [b]x[/b] :b: failed" in err.getvalue()
    finally:
        logging.getLogger("retinue").handlers.clear()
        logging.getLogger("retinue").propagate = True


def test_a_finished_model_call_shows_its_tokens() -> None:
    printer = EventPrinter(Console(file=io.StringIO()))
    data = {"input_tokens": 1234, "output_tokens": 56, "seconds": 2.04}
    assert printer.describe(Event(MODEL_CALLED, "main", data)) == (
        "[dim]· 1,234 in / 56 out tokens, 2.0s[/]"
    )


def test_memory_commands_print_names_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETINUE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(memory_app, ["show", "archivist:b:[bold]"])
    assert result.exit_code == 1
    assert "no role named 'archivist:b:[bold]' has memory" in result.output


@pytest.mark.parametrize(
    "arguments",
    [
        "[" * 10_000 + "]" * 10_000,  # 10,000 levels: json.loads itself recurses too deeply
        '{"path": "a", "content": ' + "[" * 10_000 + "]" * 10_000 + "}",
        '{"deep": ' + '{"x": ' * 400 + "1" + "}" * 400 + "}",  # parses; repr() would recurse
        '{"content": "' + "x" * 2_000_000 + '"}',  # 2 MB of arguments
        "[" * 10_000,  # not even JSON
    ],
)
def test_deeply_nested_or_huge_tool_arguments_print_one_bounded_line(arguments: str) -> None:
    err = io.StringIO()
    printer = EventPrinter(Console(file=err, emoji=False, highlight=False, width=500))
    printer(Event(TOOL_STARTED, "main", {"name": "Write", "arguments": arguments}))
    (line,) = err.getvalue().splitlines()
    assert line.startswith("→ Write(") and len(line) <= 100


def test_token_lines_of_parallel_instances_say_which_is_which() -> None:
    printer = EventPrinter(Console(file=io.StringIO()))
    data = {"input_tokens": 1234, "output_tokens": 56, "seconds": 2.04}
    lines = [printer.describe(Event(MODEL_CALLED, f"main/archivist:{i}", data)) for i in ("a", "b")]
    assert lines == [
        "[dim]· main/archivist:a 1,234 in / 56 out tokens, 2.0s[/]",
        "[dim]· main/archivist:b 1,234 in / 56 out tokens, 2.0s[/]",
    ]


def test_the_spinner_counts_tokens_as_the_token_line_does() -> None:
    printer = EventPrinter(Console(file=io.StringIO()))
    spinner = printer.spinner
    spinner.start("main")
    spinner.progress({"progress": "prompt", "prompt_tokens": 1234})
    assert "reading the prompt (1,234 tokens)" in str(spinner.__rich__())
    spinner.progress({"progress": "generating", "tokens": 56, "seconds": 7.0})
    assert "generating, 56 tokens, 8.0 tokens/s" in str(spinner.__rich__())
    line = printer.describe(
        Event(MODEL_CALLED, "main", {"input_tokens": 1234, "output_tokens": 56})
    )
    assert line == "[dim]· 1,234 in / 56 out tokens[/]"


def wrapped(chunks: list[str], width: int = 20) -> str:
    out = io.StringIO()
    lines = LineDiscipline(out, wrap=True, width=lambda: width)
    for chunk in chunks:
        lines.text(chunk)
    lines.end_line()
    return out.getvalue()


def test_streamed_text_wraps_between_words_whatever_the_chunks() -> None:
    text = "the quick brown fox jumps over the lazy dog and keeps running far away"
    for size in (1, 3, 7, 100):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        rows = wrapped(chunks).split("\n")
        assert all(len(r) <= 20 for r in rows)
        assert " ".join(r.strip() for r in rows if r.strip()) == text  # no word cut
    assert wrapped(["x" * 45]) == "x" * 20 + "\n" + "x" * 20 + "\n" + "x" * 5 + "\n"  # too wide
    wide = "一二三四五六七八九十"  # two cells each: the row is full
    assert wrapped([wide + " ab"]) == wide + "\nab\n"
    assert wrapped(["a\tb\n\tc"]) == "a\tb\n\tc\n"  # tabs kept
    assert wrapped(["line one\nline two"]) == "line one\nline two\n"


def test_a_pipe_gets_the_text_unchanged() -> None:
    out = io.StringIO()  # not a terminal, no width given
    lines = LineDiscipline(out, wrap=True)
    for chunk in ("a" * 300, " and ", "more"):
        lines.text(chunk)
    assert out.getvalue() == "a" * 300 + " and more" and lines.open
