"""The terminal program prints only through :mod:`retinue.cli.term`, whose every way of
printing passes text through :func:`retinue.safe_text.for_terminal`: a new printer in
``retinue.cli`` that writes another way (``print``, ``typer.echo``, ``sys.stdout.write``, a
console of its own, Rich's markup escape alone) fails here, with the place it was written."""

from __future__ import annotations

import ast
from pathlib import Path

import retinue.cli

CLI = Path(retinue.cli.__file__).parent
THE_WAY = "term.py"  # the one module that writes to the terminal itself

# called by name: builtins that write, and Rich's / click's own writers imported bare
RAW_NAMES = {"print", "input", "breakpoint", "Console", "get_console"}
# called as an attribute: sys.stdout.write, os.write, typer.echo, click.confirm, rich.print...
RAW_ATTRIBUTES = {"write", "writelines", "echo", "secho", "confirm", "prompt", "get_console"}
RAW_MODULES = {"rich", "click", "typer", "sys", "os", "builtins"}  # x.print(...) for these
# from rich.markup import escape: markup escaping alone passes ESC
RAW_IMPORTS = {
    ("rich", "print"),
    ("rich", "get_console"),
    ("rich.markup", "escape"),
    ("click", "echo"),
    ("click", "secho"),
    ("typer", "echo"),
    ("typer", "secho"),
    ("sys", "stdout"),
    ("sys", "stderr"),
}
# Rich renderables that print on the global console (unsafe) when given no console=
NEEDS_A_CONSOLE = {"Status", "Live", "Progress", "track"}


def _called(node: ast.Call) -> tuple[str | None, str | None]:
    """The called name, and what it is called on: ``None`` for a bare name, the object's
    name when it is one (``sys``), else ``…`` (``sys.stdout``, ``self.out``)."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id, None
    if isinstance(func, ast.Attribute):
        return func.attr, func.value.id if isinstance(func.value, ast.Name) else "…"
    return None, None


def raw_printers(source: str) -> list[str]:
    """``line: what`` for every way of printing in ``source`` that bypasses cli.term."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (node.module, alias.name) in RAW_IMPORTS:
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
        if not isinstance(node, ast.Call):
            continue
        name, owner = _called(node)
        if name is None:
            continue
        if owner is None and name in RAW_NAMES:
            found.append((node.lineno, f"{name}(...)"))
        elif (owner is not None and name in RAW_ATTRIBUTES) or (
            owner in RAW_MODULES and name in {"print", "Console"}
        ):
            found.append((node.lineno, f"{owner}.{name}(...)"))
        elif name in NEEDS_A_CONSOLE and not any(k.arg == "console" for k in node.keywords):
            found.append((node.lineno, f"{name}(...) without console="))
    return [f"{line}: {what}" for line, what in sorted(found, key=lambda f: f[0])]


def test_the_cli_prints_only_through_cli_term() -> None:
    found = [
        f"{path.name}:{where}"
        for path in sorted(CLI.glob("*.py"))
        if path.name != THE_WAY
        for where in raw_printers(path.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        "print through retinue.cli.term (console(), escape(), echo(), write_data(), "
        "read_line(), confirm()), which makes text safe for a terminal:\n" + "\n".join(found)
    )


def test_the_scan_finds_each_way_of_printing_around_cli_term() -> None:
    source = """
import sys, os, typer, click, rich
from rich.markup import escape
from rich.console import Console
from rich.status import Status
from sys import stdout
print(reply)
typer.echo(reply)
click.echo(reply, err=True)
sys.stdout.write(reply)
sys.stderr.buffer.write(data)
os.write(1, data)
self.out.write(reply)
rich.print(reply)
Console().print(reply)
Status("thinking")
input(question)
typer.confirm(question)
"""
    found = [line.partition(": ")[2] for line in raw_printers(source)]
    assert found == [
        "from rich.markup import escape",
        "from sys import stdout",
        "print(...)",
        "typer.echo(...)",
        "click.echo(...)",
        "….write(...)",
        "….write(...)",
        "os.write(...)",
        "….write(...)",
        "rich.print(...)",
        "Console(...)",
        "Status(...) without console=",
        "input(...)",
        "typer.confirm(...)",
    ]


def test_what_cli_term_offers_is_allowed() -> None:
    source = """
from rich.console import Console
from rich.status import Status
from retinue.cli.term import console, echo, escape
out = console(stderr=True)
out.print(f"[dim]{escape(text)}[/]")
echo(text, err=True)
Status(spinner, console=out)
"""
    assert raw_printers(source) == []
