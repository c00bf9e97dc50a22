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
