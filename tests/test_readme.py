"""Every code block of README.md is checked, by kind, so that no example rots:

- ``python``: run, in README order, one namespace per section, with every
  ``"openai:..."`` / ``"anthropic:..."`` model string replaced by a scripted model (no key,
  no network). A block whose code defines ``test_...`` functions is a user's test file: it
  is run by pytest in a subprocess, with ``HOME`` pointed at an empty folder and no
  ``RETINUE_HOME``, and must leave no ``~/.retinue`` behind. A block that needs something
  a test cannot have (a running ``retinue serve``, a real key) carries a ``# needs: ...``
  comment and is only compiled;
- ``sh``: each ``retinue ...`` command (bare or after ``uv run``) must parse: the command
  exists, and so do its options and arguments (parsed by the CLI itself, not run); each
  ``python FILE`` names a file of the repository;
- ``markdown``: a role file, parsed as Retinue reads role files;
- ``json``: valid JSON; a ``permissions`` example's rules must each parse as a rule;
- ``text``: the model file's SHA-256, which must be the one the code checks.

A block of any other kind fails the test until a check is added here. And README.md stays
at most 200 lines: detail belongs in the documentation site (issue 43).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

import retinue
from retinue.cli.app import app
from retinue.llm._gguf import MODELS
from retinue.policy.rules import parse_rule
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PROVIDER_MODEL = re.compile(r"\"(?:openai|anthropic):[^\"]+\"")
NEEDS = re.compile(r"^\s*# needs: \S", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Block:
    kind: str
    code: str
    line: int  # where the fence opens, 1-based
    section: str  # the "## " heading above it

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.section})"


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        headings = re.findall(r"^## (.+)$", before, re.MULTILINE)
        found.append(
            Block(match[1], match[2], before.count("\n") + 1, headings[-1] if headings else "")
        )
    return found


BLOCKS = readme_blocks()


def of_kind(*kinds: str) -> list[Block]:
    return [b for b in BLOCKS if b.kind in kinds]


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert 50 < lines <= 200, f"README.md has {lines} lines: move the detail into docs/"


def test_every_block_is_of_a_kind_this_test_checks() -> None:
    assert len(BLOCKS) >= 5  # the fences were found
    checked = {"python", "sh", "markdown", "json", "text"}
    unchecked = [b.where for b in BLOCKS if b.kind not in checked]
    assert unchecked == [], "give these README blocks a language this test checks"


# -- python ----------------------------------------------------------------------------------


def _is_test_file(block: Block) -> bool:
    return re.search(r"^def test_", block.code, re.MULTILINE) is not None


def test_the_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the examples' workspace (tests/conftest.py set the home)
    model = ScriptedModel(responder=lambda messages, tools: "ok")
    namespaces: dict[str, dict[str, Any]] = {}
    ran = 0
    try:
        for block in of_kind("python"):
            if NEEDS.search(block.code):
                compile(block.code, block.where, "exec")
                continue
            if _is_test_file(block):
                continue  # test_a_test_file_example_passes_under_pytest
            code = PROVIDER_MODEL.sub("_readme_model", block.code)
            namespace = namespaces.setdefault(block.section, {"__name__": "readme"})
            namespace["_readme_model"] = model
            try:
                exec(compile(code, block.where, "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{block.where}: {type(exc).__name__}: {exc}") from exc
            ran += 1
    finally:
        for namespace in namespaces.values():
            for value in namespace.values():
                if isinstance(value, retinue.Agent):
                    value.close()
    assert ran >= 1 and model.call_count >= 2


def test_the_python_examples_are_valid_python_as_written() -> None:
    for block in of_kind("python"):  # e.g. no `async for` outside an async function
        compile(block.code, block.where, "exec")


@pytest.mark.timeout(240)  # a second pytest starting on a loaded machine
def test_a_test_file_example_passes_under_pytest(tmp_path: Path) -> None:
    found = [b for b in of_kind("python") if _is_test_file(b)]
    if not found:
        pytest.skip("no test-file example in README.md (tests/test_docs.py runs the docs' ones)")
    [block] = found
    (tmp_path / "test_example.py").write_text(block.code, encoding="utf-8")
    home = tmp_path / "user-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RETINUE_HOME"}
    env["HOME"] = str(home)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b[1-9]\d* passed\b", proc.stdout) and "failed" not in proc.stdout
    assert not (home / ".retinue").exists()  # the fixture kept the user's data directory out


# -- sh --------------------------------------------------------------------------------------


def _commands(script: str) -> list[list[str]]:
    """The simple commands of a shell block, each as its words (comments dropped)."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        for part in re.split(r"&&|\|\||;|\|", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:  # e.g. `git clone <this repository's URL>`: a placeholder
                words = part.split("#", 1)[0].split()
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words.pop(0)  # VAR=value before the command
            if words:
                out.append(words)
    return out


def _program(words: list[str]) -> list[str]:
    """``uv run [--extra X]... program args`` -> ``program args``."""
    if words[:2] != ["uv", "run"]:
        return words
    rest = words[2:]
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if "=" not in option and option in {"--extra", "--with", "--python", "--project"}:
            rest.pop(0)
    return rest


def parse_cli(args: list[str]) -> list[str]:
    """Parse ``retinue args`` as the CLI would, without running it; the command's path."""
    command: Any = typer.main.get_command(app)
    name, rest, parent, path = "retinue", list(args), None, []
    while True:
        try:
            ctx = command.make_context(name, rest, parent=parent)
        except typer.Exit as done:  # an eager option (--version, --help) stops parsing
            assert done.exit_code == 0
            return path
        if not hasattr(command, "commands"):
            return path
        # the subcommand's name and what follows it (click keeps the name apart)
        protected = getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])
        rest = [*protected, *ctx.args]
        if not rest:
            return path
        name, command, rest = command.resolve_command(ctx, rest)
        parent = ctx
        path.append(name)


def test_the_cli_parser_refuses_what_does_not_exist() -> None:
    assert parse_cli(["memory", "export", "-o", "f.jsonl"]) == ["memory", "export"]
    for wrong in (["nosuch"], ["chat", "--nosuch"], ["memory", "search", "role"]):
        with pytest.raises(Exception, match=r"(?i)no such|missing"):
            parse_cli(wrong)


@pytest.mark.parametrize("block", of_kind("sh"), ids=lambda b: f"line{b.line}")
def test_the_shell_commands_exist_as_written(block: Block) -> None:
    checked = 0
    for words in _commands(block.code):
        program = _program(words)
        if not program:
            continue
        if program[0] == "retinue":
            try:
                parse_cli(program[1:])
            except Exception as exc:
                raise AssertionError(f"{block.where}: {shlex.join(program)}: {exc}") from exc
            checked += 1
        elif program[0] == "python":
            assert (ROOT / program[1]).is_file(), f"{block.where}: no {program[1]}"
            checked += 1
        elif program[0] == "pytest":
            checked += 1  # the test command: this suite
    assert checked, f"{block.where}: no retinue, python or pytest command to check"


# -- markdown, text --------------------------------------------------------------------------


def test_the_role_file_examples_load() -> None:
    roles = of_kind("markdown")
    assert roles
    for block in roles:
        role = parse_role(Path("example.md"), block.code)
        assert role.name and role.description and role.prompt, block.where


def test_the_json_examples_parse_and_their_permission_rules_too(tmp_path: Path) -> None:
    for block in of_kind("json"):
        data = json.loads(block.code)
        rules = data.get("permissions", {}) if isinstance(data, dict) else {}
        for kind in ("allow", "ask", "deny"):
            for rule in rules.get(kind, []):
                try:
                    parse_rule(rule, tmp_path)
                except ValueError as exc:
                    raise AssertionError(f"{block.where}: {exc}") from exc


def test_the_quoted_checksum_is_the_one_checked() -> None:
    texts = of_kind("text")
    if not texts:
        pytest.skip("no checksum in README.md (tests/test_docs.py checks the docs' ones)")
    sums = {m.sha256 for m in MODELS.values()}
    for block in texts:
        assert block.code.strip() in sums, f"{block.where}: not a checksum the code checks"
