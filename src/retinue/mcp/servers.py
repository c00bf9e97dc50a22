"""What an MCP server definition may say: the plain types that role files and the client
share (this module imports nothing of Retinue's but its errors).

A definition is either stdio, ``{"command", "args", "env", "cwd"}`` (``"type": "stdio"``
optional), or remote, ``{"type": "http" | "sse", "url", "headers"}``; ``timeout`` (seconds
one tool call may take, default 120) is accepted for both. ``${VAR}`` and ``${VAR:-default}``
in strings are kept as written when a definition is read, and expanded from the environment
by :func:`expanded` only when the server starts (as Claude Code does), so that a definition
nobody approved never carries the user's secrets (see :mod:`retinue.policy.trust`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
from pydantic import Field

from retinue.errors import ConfigError

__all__ = [
    "HttpServer",
    "ServerConfig",
    "StdioServer",
    "expanded",
    "parse_server",
    "role_servers",
    "valid_server_name",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_URL = r"^(https?://|\$\{)"  # a URL, or one that starts with a variable (checked once expanded)


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
    url: Annotated[str, Field(pattern=_URL)]
    headers: dict[str, str] = {}
    timeout: Annotated[float, Field(gt=0, le=86_400)] = 120.0

    def describe(self) -> str:
        return f"{self.type} {self.url}"


ServerConfig = StdioServer | HttpServer


def valid_server_name(name: str) -> bool:
    """Letters, digits, ``_`` and ``-``: the name sits inside ``mcp__<server>__<tool>``."""
    return _NAME.fullmatch(name) is not None


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, environ) for k, v in value.items()}
    return value


def expanded(config: ServerConfig, environ: Mapping[str, str] = os.environ) -> ServerConfig:
    """``config`` with ``${VAR}`` / ``${VAR:-default}`` filled in from ``environ``; call it
    only to start an approved server. A URL that is no http(s) URL once expanded is a
    ``ConfigError``."""
    data = _expand(config.model_dump(), environ)
    out = type(config).model_validate(data)
    if isinstance(out, HttpServer) and not re.match(r"^https?://", out.url):
        raise ConfigError(f"MCP server URL {out.url[:100]!r} is not an http(s) URL")
    return out


def parse_server(name: str, raw: Any, where: str) -> ServerConfig:
    """One definition, as written; raise ``ConfigError`` saying which server in which file
    is wrong."""
    if not valid_server_name(name):
        raise ConfigError(f"{where}: MCP server name {name!r} may only use letters, digits, _ -")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: MCP server {name!r} must be a table/object")
    kind = raw.get("type", "stdio" if "command" in raw else None)
    model: type[pydantic.BaseModel] = StdioServer if kind == "stdio" else HttpServer
    if kind is None:
        raise ConfigError(f"{where}: MCP server {name!r} needs a 'command' or a 'type' and 'url'")
    try:
        return model.model_validate(raw)  # type: ignore[return-value]
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "definition"
        raise ConfigError(f"{where}: MCP server {name!r}: {key}: {err['msg']}") from None


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
