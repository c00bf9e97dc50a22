"""Every code block of the documentation site (``docs/**/*.md``) is checked, by kind, as
``tests/test_readme.py`` checks README.md's, with the same rules and markers:

- ``python``: run, in page order, one namespace per page, with every ``"openai:..."`` /
  ``"anthropic:..."`` model string replaced by a scripted model; a block that defines
  ``test_...`` functions is run by pytest in a subprocess; a block with a ``# needs: ...``
  comment (a running server, a real key, the embedded model) is only compiled;
- ``sh`` and ``console`` (``$ `` lines): each ``retinue ...`` command must parse, each
  ``python FILE`` must name a file of the repository;
- ``markdown``: a role file; ``json``: valid JSON (permission rules parse); ``toml``: valid
  TOML; ``text``: a model file's SHA-256 must be one the code checks (other text, such as
  a diagram, has nothing to run).

And the site itself: ``mkdocs build --strict`` (internal links and anchors checked) when the
``docs`` dependency group is installed, and a Chromium screenshot of its home page and of a
reference page (tests/web's Chromium; each skips without what it needs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import retinue
from retinue.llm._gguf import MODELS
from retinue.policy.rules import parse_rule
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel
from test_readme import FENCE, NEEDS, PROVIDER_MODEL, _commands, _program, parse_cli

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True, slots=True)
class Block:
    kind: str
    code: str
    page: str  # relative to docs/
    line: int

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def doc_blocks() -> list[Block]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            page = path.relative_to(DOCS).as_posix()
            found.append(Block(match[1], match[2], page, line))
    return found


BLOCKS = doc_blocks()


def of_kind(*kinds: str) -> list[Block]:
    return [b for b in BLOCKS if b.kind in kinds]


def _is_test_file(block: Block) -> bool:
    return re.search(r"^def test_", block.code, re.MULTILINE) is not None


def test_every_block_is_of_a_kind_this_test_checks() -> None:
    assert len(BLOCKS) >= 30  # the pages and their fences were found
    checked = {"python", "sh", "console", "markdown", "json", "toml", "text"}
    unchecked = [b.where for b in BLOCKS if b.kind not in checked]
    assert unchecked == [], "give these blocks a language this test checks"


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
            code = PROVIDER_MODEL.sub("_docs_model", block.code)
            namespace = namespaces.setdefault(block.page, {"__name__": "docs"})
            namespace["_docs_model"] = model
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
    assert ran >= 6 and model.call_count >= 6


def test_the_python_examples_are_valid_python_as_written() -> None:
    for block in of_kind("python"):
        compile(block.code, block.where, "exec")


@pytest.mark.timeout(240)  # a second pytest starting on a loaded machine
@pytest.mark.parametrize(
    "block", [b for b in of_kind("python") if _is_test_file(b)], ids=lambda b: b.where
)
def test_a_test_file_example_passes_under_pytest(block: Block, tmp_path: Path) -> None:
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
    assert not (home / ".retinue").exists()


def _shell_text(block: Block) -> str:
    if block.kind != "console":
        return block.code
    return "\n".join(line[2:] for line in block.code.splitlines() if line.startswith("$ "))


@pytest.mark.parametrize("block", of_kind("sh", "console"), ids=lambda b: b.where)
def test_the_shell_commands_exist_as_written(block: Block) -> None:
    checked = 0
    for words in _commands(_shell_text(block)):
        program = _program(words)
        if not program:
            continue
        if program[0] == "retinue":
            try:
                parse_cli(program[1:])
            except Exception as exc:
                raise AssertionError(f"{block.where}: {' '.join(program)}: {exc}") from exc
            checked += 1
        elif program[0] == "python":
            assert (ROOT / program[1]).is_file(), f"{block.where}: no {program[1]}"
            checked += 1
        elif program[0] == "pytest":
            checked += 1
    assert checked, f"{block.where}: no retinue, python or pytest command to check"


def test_the_role_file_examples_load() -> None:
    roles = of_kind("markdown")
    assert roles
    for block in roles:
        role = parse_role(Path("example.md"), block.code)
        assert role.name and role.description and role.prompt, block.where


def test_the_json_and_toml_examples_parse(tmp_path: Path) -> None:
    for block in of_kind("json", "toml"):
        try:
            data = json.loads(block.code) if block.kind == "json" else tomllib.loads(block.code)
        except ValueError as exc:
            raise AssertionError(f"{block.where}: {exc}") from exc
        rules = data.get("permissions", {}) if isinstance(data, dict) else {}
        for kind in ("allow", "ask", "deny"):
            for rule in rules.get(kind, []):
                try:
                    parse_rule(rule, tmp_path)
                except ValueError as exc:
                    raise AssertionError(f"{block.where}: {exc}") from exc


def test_the_quoted_checksums_are_the_ones_checked() -> None:
    sums = {m.sha256 for m in MODELS.values()}
    quoted = [b for b in of_kind("text") if re.fullmatch(r"[0-9a-f]{64}", b.code.strip())]
    assert quoted
    for block in quoted:
        assert block.code.strip() in sums, f"{block.where}: not a checksum the code checks"


# -- the built site --------------------------------------------------------------------------


def _has_mkdocs() -> bool:
    return all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly into a temporary folder (links and anchors checked)."""
    if not _has_mkdocs():
        pytest.skip("the docs dependency group is not installed (uv sync --group docs)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.mark.timeout(300)
def test_the_site_builds_strictly_with_its_generated_pages(site: Path) -> None:
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "retinue memory export" in cli and "--permission-mode" in cli
    schema = json.loads((site / "reference" / "openapi.json").read_text(encoding="utf-8"))
    assert "/v1/chat/completions" in schema["paths"]
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="retinue.Agent"' in api and ":class:`" not in api
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert llms.startswith("# Retinue") and "(how-to/roles/)" in llms
    assert "SubAgent" in (site / "llms-full.txt").read_text(encoding="utf-8")


@pytest.mark.timeout(300)
def test_a_browser_shows_the_home_and_a_reference_page(site: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (install Debian's chromium package, as .ci/run does)")
    from playwright.sync_api import sync_playwright

    artifacts = Path(__file__).parent / "web" / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((site / "index.html").as_uri())
            assert page.locator("h1").first.inner_text().startswith("Retinue")
            assert page.locator("nav").get_by_text("Python API").count() >= 1
            page.screenshot(path=str(artifacts / "docs-home.png"))
            page.goto((site / "reference" / "api" / "index.html").as_uri())
            heading = page.locator("[id='retinue.Agent']").first
            assert heading.is_visible()
            page.screenshot(path=str(artifacts / "docs-api.png"))
        finally:
            browser.close()
