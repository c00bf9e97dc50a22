"""Where MCP servers are configured, and what a definition may say.

Three places, in the format users already keep (Claude Code's):

- ``<workspace>/.mcp.json``: ``{"mcpServers": {name: definition}}``;
- ``[mcp_servers]`` in ``config.toml`` (``[mcp_servers.<name>]`` tables), which wins over
  ``.mcp.json`` for the same name;
- a role's ``mcpServers`` front matter: names of configured servers, or inline definitions
  (a mapping, or a list mixing names and one-entry mappings) that only that role sees.

A definition is either stdio, ``{"command", "args", "env", "cwd"}`` (``"type": "stdio"``
optional), or remote, ``{"type": "http" | "sse", "url", "headers"}``; ``timeout`` (seconds
one tool call may take, default 120) is accepted for both. ``${VAR}`` and ``${VAR:-default}``
in strings are expanded from the environment, as Claude Code does. A bad definition is an
:class:`~retinue.errors.ConfigError` of one line naming the file and the server.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import Field

from retinue.errors import ConfigError

if TYPE_CHECKING:
    from retinue.config import Settings
    from retinue.mcp.client import McpHub
    from retinue.subagents.roles import Role
    from retinue.tools.base import ToolRegistry

__all__ = [
    "HttpServer",
    "ServerConfig",
    "StdioServer",
    "attach_servers",
    "load_servers",
    "parse_server",
    "valid_server_name",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class StdioServer(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    type: Literal["stdio"] = "stdio"
    command: Annotated[str, Field(min_length=1)]
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    timeout: Annotated[float, Field(gt=0, le=86_400)] = 120.0

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


class HttpServer(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    type: Literal["http", "sse", "streamable-http"]
    url: Annotated[str, Field(pattern=r"^https?://")]
    headers: dict[str, str] = {}
    timeout: Annotated[float, Field(gt=0, le=86_400)] = 120.0

    def describe(self) -> str:
        return f"{self.type} {self.url}"


ServerConfig = StdioServer | HttpServer


def valid_server_name(name: str) -> bool:
    """Letters, digits, ``_`` and ``-``: the name sits inside ``mcp__<server>__<tool>``."""
    return _NAME.fullmatch(name) is not None


def _expand(value: Any) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


def parse_server(name: str, raw: Any, where: str) -> ServerConfig:
    """One definition; raise ``ConfigError`` saying which server in which file is wrong."""
    if not valid_server_name(name):
        raise ConfigError(f"{where}: MCP server name {name!r} may only use letters, digits, _ -")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: MCP server {name!r} must be a table/object")
    data = _expand(raw)
    kind = data.get("type", "stdio" if "command" in data else None)
    model: type[pydantic.BaseModel] = StdioServer if kind == "stdio" else HttpServer
    if kind is None:
        raise ConfigError(f"{where}: MCP server {name!r} needs a 'command' or a 'type' and 'url'")
    try:
        return model.model_validate(data)  # type: ignore[return-value]
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "definition"
        raise ConfigError(f"{where}: MCP server {name!r}: {key}: {err['msg']}") from None


def _servers_of(table: Any, where: str) -> dict[str, ServerConfig]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: 'mcpServers' must be an object of server definitions")
    return {str(name): parse_server(str(name), raw, where) for name, raw in table.items()}


def read_mcp_json(path: Path) -> dict[str, ServerConfig]:
    """The servers of a Claude Code ``.mcp.json`` (none when the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a JSON object with 'mcpServers'")
    return _servers_of(data.get("mcpServers", {}), str(path))


def load_servers(
    workspace: Path, toml_servers: Mapping[str, Any] | None, config_file: Path | None = None
) -> dict[str, ServerConfig]:
    """Every configured server by name: ``.mcp.json`` first, ``config.toml`` over it."""
    servers = read_mcp_json(workspace / ".mcp.json")
    where = f"{config_file or 'config.toml'} [mcp_servers]"
    servers.update(_servers_of(dict(toml_servers or {}), where))
    return servers


def role_servers(value: Any, where: str) -> tuple[dict[str, ServerConfig], list[str]]:
    """A role's ``mcpServers``: ``(inline definitions, names of configured servers)``.

    Entries are names, ``{name: definition}`` (or ``{name: null}`` for a configured one), or
    the whole field is a mapping of names to definitions.
    """
    inline: dict[str, ServerConfig] = {}
    named: list[str] = []
    items = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ConfigError(f"{where}: 'mcpServers' must be a list or a mapping")
    for item in items:
        if isinstance(item, str):
            named.append(item)
        elif isinstance(item, tuple) and item[1] is None:
            named.append(str(item[0]))
        elif isinstance(item, tuple):
            inline[str(item[0])] = parse_server(str(item[0]), item[1], where)
        elif isinstance(item, dict) and len(item) == 1:
            ((name, raw),) = item.items()
            if raw is None:
                named.append(str(name))
            else:
                inline[str(name)] = parse_server(str(name), raw, where)
        else:
            raise ConfigError(f"{where}: 'mcpServers' entries are names or {{name: definition}}")
    return inline, named


def attach_servers(tools: ToolRegistry, settings: Settings, roles: Iterable[Role]) -> McpHub | None:
    """Give ``tools`` the MCP servers of ``settings`` and of ``roles`` (``None`` when there
    are none; the SDK is only loaded when there are some)."""
    role_defs = {
        r.name: {n: c for n, c in r.mcp_servers if c is not None}
        for r in roles
        if any(c is not None for _, c in r.mcp_servers)
    }
    servers = load_servers(settings.workspace, settings.mcp_servers, settings.config_file)
    if not servers and not role_defs:
        return None
    from retinue.mcp.client import McpHub
    from retinue.mcp.tools import McpSource

    log_dir = settings.home / "logs" / "mcp"
    hub = McpHub(servers, cwd=settings.workspace, log_dir=log_dir, role_servers=role_defs)
    tools.add_source(McpSource(hub))
    return hub
