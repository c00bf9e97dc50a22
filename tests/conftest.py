"""Test-session setup: real model requests are forbidden (loopback servers only), and no test
touches the user's data directory: ``RETINUE_HOME`` is a temporary folder, one for the
session's shared fixtures and a fresh one for each test (a test that sets its own wins).

Every test gets one of three markers, so that ``pytest -m unit`` is the loop of a minute:

- ``external``: needs something outside Python — PostgreSQL (a ``pg_url`` / ``pg_urls`` /
  ``pg`` fixture, a ``postgres`` backend parameter, or ``pgserver`` in its file), Chromium
  (the ``browser`` fixture, ``playwright`` in its file), Node (``npm``, ``node_modules``),
  Phoenix, or the embedded model (``tests/llm_local``, the ``local_model`` marker);
- ``integration``: its file (or its folder's ``conftest.py``) starts real servers,
  subprocesses, terminals or the sandbox (``subprocess``, ``ServerThread``, ``uvicorn``,
  ``tmux``, ``bwrap``, ``sys.executable``...), or it drives a whole program: the ``retinue``
  command (``tests/cli``), the benchmarks (``tests/benchmarks``), a randomised run of many
  sessions (a ``*_fuzz.py`` file);
- ``unit``: everything else.
"""

import os
import re
import signal
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

_EXTERNAL_FOLDERS = {"llm_local", "web"}
_INTEGRATION_FOLDERS = {"cli", "benchmarks"}
_EXTERNAL_FIXTURES = {"pg_url", "pg_urls", "pg", "browser"}
_EXTERNAL_TEXT = re.compile(r"pgserver|playwright|\bnpm\b|node_modules|[\"']node[\"']|phoenix")
_INTEGRATION_TEXT = re.compile(
    r"subprocess|ServerThread|serverkit|uvicorn|tmux|bwrap|sandbox|Popen|socket|sys\.executable"
)
TIERS = {
    "unit": "a test of Python code alone (pytest -m unit: the quick loop)",
    "integration": "starts real servers, subprocesses, terminals or the sandbox",
    "external": "needs PostgreSQL, Chromium, Node, Phoenix or the embedded model",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    # A shell without job control starts a background job (`pytest ... &`) with Ctrl-C
    # ignored, and the programs the tests start would inherit that: the tests that press
    # Ctrl-C on a chat would fail. Python's own handler is reset to the default at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def file_tier(path: Path) -> str | None:
    """The tier of every test of the file at ``path``, when its file or folder decides it."""
    text = _text(path)
    if path.parent.name in _EXTERNAL_FOLDERS or _EXTERNAL_TEXT.search(text):
        return "external"
    conftest = _text(path.parent / "conftest.py") if path.parent.name != "tests" else ""
    if (
        path.parent.name in _INTEGRATION_FOLDERS
        or path.stem.endswith("_fuzz")
        or _INTEGRATION_TEXT.search(text)
        or _INTEGRATION_TEXT.search(conftest)
    ):
        return "integration"
    return None


def tier(item: pytest.Item) -> str:
    """``unit``, ``integration`` or ``external``, by the rules of this module's docstring."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    fixtures = set(getattr(item, "fixturenames", ()))
    if (
        fixtures & _EXTERNAL_FIXTURES
        or params.get("backend") == "postgres"
        or item.get_closest_marker("local_model")
    ):
        return "external"
    return file_tier(Path(item.path)) or "unit"


def _is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and path.name.startswith("test_")


@cache
def no_unit_test_below(folder: Path) -> bool:
    """Whether every test file under ``folder`` has a tier of its own, so none is unit."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith((".", "_"))]
        for name in files:
            path = Path(root, name)
            if _is_test_file(path) and not file_tier(path):
                return False
    return True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m unit``, files none of whose tests are unit are not even imported, nor the
    ``conftest.py`` of a folder without unit tests (importing every test module and the
    servers' kits is half of the quick loop's time otherwise)."""
    if (config.getoption("markexpr", "") or "").strip() != "unit":
        return None
    if _is_test_file(collection_path) and file_tier(collection_path):
        return True
    if collection_path.is_dir() and no_unit_test_below(collection_path):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier(item))


os.environ["RETINUE_BLOCK_REAL_MODELS"] = "1"
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("GEMINI_API_KEY", None)  # a Google key also picks the default model
os.environ.pop("GOOGLE_API_KEY", None)


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("retinue-home-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETINUE_HOME", str(home))
        yield home


@pytest.fixture(autouse=True)
def _test_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("retinue-home")
    monkeypatch.setenv("RETINUE_HOME", str(home))
    return home
