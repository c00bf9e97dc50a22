"""Settings, from flags > environment > ``<home>/config.toml`` > defaults.

Environment names other tools rely on: ``RETINUE_MODEL`` (the main agent's model string) and
``RETINUE_HOME`` (the data directory, default ``~/.retinue``). The TOML file may set ``model``,
``tenant``, ``max_depth``, ``max_iterations``, ``session_token_budget`` (tokens one interactive
sub-agent session may spend, input and output together; 0 = unlimited) and a
``[model_aliases]`` table (Claude Code's ``sonnet`` / ``opus`` / ``haiku`` names for role
files).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from retinue.errors import ConfigError

__all__ = ["DEFAULT_MODEL_ALIASES", "Settings", "default_home"]

DEFAULT_MODEL_ALIASES = {
    "sonnet": "anthropic:claude-sonnet-4-5",
    "opus": "anthropic:claude-opus-4-1",
    "haiku": "anthropic:claude-haiku-4-5",
}


def default_home() -> Path:
    return Path(os.environ.get("RETINUE_HOME") or Path.home() / ".retinue").expanduser()


@dataclass(slots=True)
class Settings:
    home: Path = field(default_factory=default_home)
    workspace: Path = field(default_factory=Path.cwd)
    model: str | None = None
    tenant: str = "default"
    max_depth: int = 3
    max_iterations: int = 50
    session_token_budget: int = 0  # tokens one interactive session may use; 0 = no limit
    model_aliases: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_MODEL_ALIASES))

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @classmethod
    def load(
        cls,
        *,
        home: Path | None = None,
        workspace: Path | None = None,
        model: str | None = None,
        tenant: str | None = None,
    ) -> Settings:
        """Settings for this process: explicit arguments win, then env, then the TOML file."""
        s = cls(home=(home or default_home()).expanduser().resolve())
        s._apply_file()
        s.model = model or os.environ.get("RETINUE_MODEL") or s.model
        if tenant:
            s.tenant = tenant
        if workspace is not None:
            s.workspace = workspace
        s.workspace = s.workspace.expanduser().resolve()
        if not s.workspace.is_dir():
            raise ConfigError(f"workspace {s.workspace} is not a directory (--workspace)")
        return s

    def _apply_file(self) -> None:
        path = self.config_file
        if not path.is_file():
            return
        try:
            data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        known = {f.name for f in fields(self)} - {"home", "workspace"}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {sorted(known)})")
            if key == "model_aliases":
                if not isinstance(value, dict):
                    raise ConfigError(f"{path}: model_aliases must be a table")
                self.model_aliases.update({str(k): str(v) for k, v in value.items()})
                continue
            expected = type(getattr(self, key)) if getattr(self, key) is not None else str
            if not isinstance(value, expected):
                kind = {int: "an integer", str: "a string"}.get(expected, expected.__name__)
                raise ConfigError(f"{path}: {key} must be {kind}")
            setattr(self, key, value)
