"""One set of model names everywhere (issue 25, item 14): ``--model``, ``RETINUE_MODEL``,
``config.toml``, a role file's ``model:``, ``Agent(model=...)`` and ``resolve_model`` accept
the same names (``provider:model``, a bare model id, an alias) and refuse the same ones with
the same message; ``gpt4`` is told to try ``openai:gpt-4``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.config import Settings, canonical_model
from retinue.errors import ConfigError
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.resolve import resolve_model
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

NAMES = [
    ("gpt-4o", "openai:gpt-4o"),
    ("o3-mini", "openai:o3-mini"),
    ("sonnet", "anthropic:claude-sonnet-5-5"),
    ("Opus", "anthropic:claude-opus-5-5"),
    ("strong", "anthropic:claude-opus-5-5"),
    ("claude-haiku-4-5", "anthropic:claude-haiku-4-5"),
    ("openai:gpt-4.1", "openai:gpt-4.1"),
    ("local:qwen2.5-coder-0.5b", "local:qwen2.5-coder-0.5b"),
]
REFUSED = ["gpt4", "nonsense", "openai:", ":gpt-4o"]


def role_model(name: str, home: Path) -> tuple[str | None, tuple[str, ...]]:
    settings = Settings.load(home=home, workspace=home.parent)
    text = f"---\nname: r\ndescription: d\nmodel: '{name}'\n---\nbody"
    role = parse_role(Path("r.md"), text, settings.model_aliases)
    return role.model, role.notes


@pytest.mark.parametrize(("name", "expected"), NAMES)
def test_every_surface_accepts_the_same_names(
    name: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RETINUE_MODEL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    assert Settings.load(home=home, model=name).model == expected  # --model, Agent(model=)
    monkeypatch.setenv("RETINUE_MODEL", name)
    assert Settings.load(home=home).model == expected
    monkeypatch.delenv("RETINUE_MODEL")
    (home / "config.toml").write_text(f'model = "{name}"\n')
    assert Settings.load(home=home).model == expected
    assert role_model(name, home) == (expected, ())
    assert canonical_model(name) == expected


@pytest.mark.parametrize("name", REFUSED)
def test_every_surface_refuses_the_same_names_with_the_same_message(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RETINUE_MODEL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(ConfigError) as flag:
        Settings.load(home=home, model=name)
    monkeypatch.setenv("RETINUE_MODEL", name)
    with pytest.raises(ConfigError) as env:
        Settings.load(home=home)
    monkeypatch.delenv("RETINUE_MODEL")
    (home / "config.toml").write_text(f'model = "{name}"\n')
    with pytest.raises(ConfigError) as file:
        Settings.load(home=home)
    with pytest.raises(ConfigError) as library:
        resolve_model(name)
    (home / "config.toml").unlink()
    model, notes = role_model(name, home)
    messages = [str(e.value) for e in (flag, env, file, library)]
    head = f"model {name!r} is not of the form provider:model"
    assert all(m.startswith(head) for m in messages), messages
    assert messages[0].endswith("--model)") or messages[0].endswith("check --model")
    assert "RETINUE_MODEL" in messages[1] and "config.toml" in messages[2]
    assert model is None and notes[0].startswith(head)
    core = messages[0].split(";")[0]  # what is wrong reads the same on every surface
    assert all(m.split(";")[0] == core for m in [*messages, notes[0]])


def test_gpt4_without_its_dash_is_told_what_it_probably_meant() -> None:
    with pytest.raises(ConfigError, match=r"did you mean openai:gpt-4\?"):
        canonical_model("gpt4")
    with pytest.raises(ConfigError, match=r"did you mean openai:gpt-4o\?"):
        canonical_model("GPT4o")


def test_a_users_alias_works_on_the_command_line_as_in_role_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[model_aliases]\nfast = "openai:gpt-4o-mini"\n')
    assert Settings.load(home=home, model="fast").model == "openai:gpt-4o-mini"
    assert role_model("fast", home) == ("openai:gpt-4o-mini", ())


def retinue(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    clean |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "retinue", *args],
        env=clean,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


def test_retinue_run_accepts_a_bare_model_id_and_refuses_gpt4_in_one_line(
    tmp_path: Path,
) -> None:
    with LoopbackOpenAIServer(ScriptedModel(["Hello."])) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
        ok = retinue(["run", "--model", "gpt-4o", "hi"], tmp_path, **env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "Hello.\n"
    bad = retinue(["run", "--model", "gpt4", "hi"], tmp_path)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "did you mean openai:gpt-4?" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
