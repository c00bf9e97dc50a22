"""Where MCP servers are configured, which of them may start, and the hub they start in.

Three places, in the format users already keep (Claude Code's):

- ``<workspace>/.mcp.json``: ``{"mcpServers": {name: definition}}``;
- ``[mcp_servers]`` in ``config.toml`` (``[mcp_servers.<name>]`` tables), which wins over
  ``.mcp.json`` for the same name;
- a role's ``mcpServers`` front matter: names of configured servers, or inline definitions
  (a mapping, or a list mixing names and one-entry mappings) that only that role sees.

What a definition may say is :mod:`retinue.mcp.servers`. A bad one is a
:class:`~retinue.errors.ConfigError` of one line naming the file and the server.

**Trust.** A definition read from a file inside the workspace (``.mcp.json``, a role file
under ``.retinue/agents`` or ``.claude/agents``) starts only once the user approved it
(:mod:`retinue.policy.trust`; ``retinue mcp approve``). Remote servers too: they run no
code here, but the workspace would choose where the user's headers (``${VAR}`` expanded)
and the model's tool calls go. An unapproved one is reported in one line and left out of
the hub, before anything in it is expanded.

**Where they run.** Approval is for the definition; what it runs (``tools/server.py``, a
shadowing ``json.py``, ``package.json``...) the agent's sandboxed ``Bash`` may have rewritten.
So an approved workspace definition starts only inside the sandbox, and the user's own ones
there too unless ``config.toml``'s ``[sandbox] trusted_outside`` names them (``"mcp"`` or
``"mcp:<name>"``); see :mod:`retinue.policy.launch` and :func:`placement`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from retinue.errors import ConfigError
from retinue.mcp.servers import (
    HttpServer,
    ServerConfig,
    StdioServer,
    parse_server,
    role_servers,
    valid_server_name,
)
from retinue.policy.launch import Placement, placement_of
from retinue.policy.trust import Definition, TrustStore, extra_digest, needs_trust, untrusted_line

if TYPE_CHECKING:
    from retinue.config import Settings
    from retinue.mcp.client import McpHub
    from retinue.tools.base import ToolRegistry

__all__ = [
    "Configured",
    "HttpServer",
    "ServerConfig",
    "StdioServer",
    "attach_servers",
    "build_hub",
    "configured_servers",
    "definition_of",
    "load_servers",
    "parse_server",
    "placement",
    "role_servers",
    "startable",
    "trust_state",
    "valid_server_name",
]

log = logging.getLogger("retinue.mcp")
MAX_MCP_JSON = 1024 * 1024


class RoleLike(Protocol):
    """What this module reads of a role (:class:`retinue.subagents.roles.Role`)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> Path | None: ...
    @property
    def mcp_servers(self) -> tuple[tuple[str, ServerConfig | None], ...]: ...


def _servers_of(table: Any, where: str) -> dict[str, ServerConfig]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: 'mcpServers' must be an object of server definitions")
    return {str(name): parse_server(str(name), raw, where) for name, raw in table.items()}


def read_mcp_json(path: Path) -> dict[str, ServerConfig]:
    """The servers of a Claude Code ``.mcp.json`` (none when the file does not exist or is
    empty: the Bash sandbox leaves an empty one while a command runs, see
    :mod:`retinue.tools.builtin.sandbox`)."""
    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MCP_JSON + 1)
        if len(raw) > MAX_MCP_JSON:
            raise ConfigError(f"{path}: larger than {MAX_MCP_JSON} bytes; not read")
        text = raw.decode("utf-8")
        if not text.strip():
            return {}
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a JSON object with 'mcpServers'")
    return _servers_of(data.get("mcpServers", {}), str(path))


def load_servers(
    workspace: Path, toml_servers: Mapping[str, Any] | None, config_file: Path | None = None
) -> dict[str, ServerConfig]:
    """Every configured server by name: ``.mcp.json`` first, ``config.toml`` over it."""
    return {c.name: c.config for c in _shared(workspace, toml_servers, config_file)}


def _shared(
    workspace: Path, toml_servers: Mapping[str, Any] | None, config_file: Path | None
) -> list[Configured]:
    mcp_json = workspace / ".mcp.json"
    found = {n: Configured(n, c, mcp_json) for n, c in read_mcp_json(mcp_json).items()}
    where = f"{config_file or 'config.toml'} [mcp_servers]"
    for name, config in _servers_of(dict(toml_servers or {}), where).items():
        found[name] = Configured(name, config, config_file)
    return list(found.values())


@dataclass(frozen=True, slots=True)
class Configured:
    """One server definition and where it came from (``source`` ``None``: written in code;
    ``role`` ``None``: shared by every agent)."""

    name: str
    config: ServerConfig
    source: Path | None
    role: str | None = None

    def definition(self) -> Definition | None:
        """What trust is asked for (``None`` for one written in code)."""
        return None if self.source is None else definition_of(self.name, self.config, self.source)


def definition_of(name: str, config: ServerConfig, source: Path) -> Definition:
    """``config`` as a :class:`~retinue.policy.trust.Definition`: values as written,
    unexpanded; env and header values only hashed."""
    if isinstance(config, StdioServer):
        extra = extra_digest({"env": config.env, "cwd": config.cwd})
        return Definition("mcp", name, config.command, tuple(config.args),
                          tuple(sorted(config.env)), source, extra)  # fmt: skip
    extra = extra_digest({"type": config.type, "headers": config.headers})
    return Definition("mcp", name, config.url, (), tuple(sorted(config.headers)), source, extra)


def configured_servers(settings: Settings, roles: Iterable[RoleLike]) -> list[Configured]:
    """Every server these settings and roles define: the shared ones, then each role's
    inline ones."""
    found = _shared(settings.workspace, settings.mcp_servers, settings.config_file)
    for role in roles:
        for name, config in role.mcp_servers:
            if config is not None:
                found.append(Configured(name, config, role.source, role.name))
    return found


def trust_state(c: Configured, settings: Settings, store: TrustStore) -> str:
    """``"own"`` (the user's file or code: no approval needed), ``"approved"`` or
    ``"untrusted"``."""
    d = c.definition()
    if d is None or not needs_trust(d, settings.workspace, settings.home):
        return "own"
    return "approved" if store.is_trusted(d) else "untrusted"


Ask = Callable[[Definition], bool]
"""Asked about each unapproved definition before it is left out; ``True`` approves it."""


def startable(
    settings: Settings, roles: Iterable[RoleLike], ask: Ask | None = None
) -> tuple[list[Configured], list[Configured]]:
    """``(may start, not approved)``; each one ``ask`` approves is recorded as approved."""
    store = TrustStore(settings.home)
    ok: list[Configured] = []
    refused: list[Configured] = []
    for c in configured_servers(settings, roles):
        state = trust_state(c, settings, store)
        d = c.definition()
        if state == "untrusted" and d is not None and ask is not None and ask(d):
            store.approve([d])
            state = "approved"
        (refused if state == "untrusted" else ok).append(c)
    return ok, refused


def attach_servers(
    tools: ToolRegistry, settings: Settings, roles: Iterable[RoleLike], ask: Ask | None = None
) -> McpHub | None:
    """Give ``tools`` the MCP servers of ``settings`` and of ``roles`` that may start
    (``None`` when there are none; the SDK is only loaded when there are some). Each one
    not approved is logged as a warning of one line and left out."""
    ok, refused = startable(settings, roles, ask)
    for c in refused:
        d = c.definition()
        assert d is not None
        log.warning("%s", untrusted_line(d))
    hub = build_hub(settings, ok)
    if hub is not None:
        from retinue.mcp.tools import McpSource

        tools.add_source(McpSource(hub))
    return hub


def placement(c: Configured, settings: Settings) -> Placement:
    """Where ``c``'s program may start: in the sandbox only when a workspace file defines
    it; the user's own in the sandbox too, unless ``[sandbox] trusted_outside`` names it."""
    d = c.definition()
    own = d is None or not needs_trust(d, settings.workspace, settings.home)
    outside = settings.sandbox.get("trusted_outside", ())
    return placement_of("mcp", c.name, own, outside)


def build_hub(settings: Settings, servers: Iterable[Configured]) -> McpHub | None:
    """The hub of ``servers`` (checked by :func:`startable` first), ``None`` for none."""
    shared: dict[str, ServerConfig] = {}
    private: dict[str, dict[str, ServerConfig]] = {}
    where: dict[tuple[str | None, str], Placement] = {}
    for c in servers:
        (shared if c.role is None else private.setdefault(c.role, {}))[c.name] = c.config
        where[(c.role, c.name)] = placement(c, settings)
    if not shared and not private:
        return None
    from retinue.mcp.client import McpHub

    log_dir = settings.home / "logs" / "mcp"
    return McpHub(shared, cwd=settings.workspace, log_dir=log_dir, role_servers=private,
                  placements=where, data_dir=settings.home)  # fmt: skip
