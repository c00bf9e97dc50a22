"""One connection per configured MCP server, shared by every agent of the process.

A server starts on first use (its tools are listed or called) in a task the hub owns; the
SDK's ``Client`` is entered and left in that task, as anyio requires. When the server dies
(a crash, a dropped connection) the call in flight gets an :class:`McpError` saying so and
the next use starts it again. A call past the server's ``timeout`` is abandoned, and the
SDK tells the server with ``notifications/cancelled``; so does a cancelled run. At 2026-07-28
the client declares MCP Tasks: a call the server runs as a task is polled to its end
(:mod:`retinue.mcp.tasks`; abandoned, it is cancelled with ``tasks/cancel``). A
tool-list change (a ``tools/list_changed`` notification, or the event of a 2026
``subscriptions/listen`` stream) makes the next listing ask the server again.
:meth:`McpHub.close` stops every server (stdio processes are terminated by the SDK); a
stdio server also exits on its own when this process dies, since its stdin closes.

A stdio server starts where its placement says (:mod:`retinue.policy.launch`): one the
workspace defines only inside the ``Bash`` tool's sandbox (with the network), the user's own
there too unless ``[sandbox] trusted_outside`` names it; always in a PID namespace of its own
that dies with it and with Retinue. Its environment is the ``Bash`` tool's allow-list and the
definition's own ``env``: never the provider keys Retinue was started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO

import mcp_types as types
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from retinue.config import default_home
from retinue.errors import RetinueError
from retinue.mcp.servers import HttpServer, ServerConfig, StdioServer, expanded
from retinue.mcp.tasks import TASKS, TasksClient
from retinue.policy.launch import Launch, Placement
from retinue.tools.builtin.sandbox import safe_environment

__all__ = ["McpError", "McpHub", "McpServer", "retinue_version"]

log = logging.getLogger("retinue.mcp")
START_TIMEOUT = 30.0
RETRY_AFTER = 30.0  # a server that failed to start is not tried again sooner


def retinue_version() -> str:
    """Retinue's version, as it names itself to MCP peers (clientInfo, serverInfo)."""
    try:
        return version("retinue")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0"


class McpError(RetinueError):
    """An MCP server could not be started, or failed during a call."""


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an exception (anyio wraps them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


class McpServer:
    """One configured server: its state, its tools, and the calls made to it. A stdio
    server starts as ``placement`` says, in the sandbox of the workspace ``cwd`` (which
    hides ``data_dir``, default the data directory)."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        cwd: Path,
        log_dir: Path | None,
        placement: Placement = "own",
        data_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.placement: Placement = placement
        self._launch = Launch(cwd, data_dir or default_home())
        self._release: Callable[[], None] | None = None
        self.state = "stopped"  # stopped | running | crashed | failed
        self.error: str | None = None
        self.starts = 0
        self._cwd = cwd
        self._log_dir = log_dir
        self._client: Client | None = None
        self._tools: list[types.Tool] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._failed_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def timeout(self) -> float:
        return self.config.timeout

    @property
    def tasks(self) -> bool:
        """Whether a call may run as an MCP task here (connected at 2026-07-28 to a server
        that offers the Tasks extension): then a tool that requires tasks can be called."""
        client = self._client
        if client is None:
            return False
        try:
            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            offered = client.server_capabilities.extensions or {}
        except Exception:  # not connected after all
            return False
        return modern and TASKS in offered

    async def list_tools(self, *, retry: bool = True) -> list[types.Tool]:
        """The server's tools (starting it if needed); asked again after a change notice.
        A connection found dead is restarted once."""
        client = await self._ensure()
        if self._tools is None:
            try:
                listed, cursor = [], None
                for _ in range(100):  # a paginator that never ends cannot hang a run
                    page = await asyncio.wait_for(client.list_tools(cursor=cursor), self.timeout)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
            except Exception as exc:
                error = self._failed("listing its tools", exc)
                if retry:
                    return await self.list_tools(retry=False)
                raise error from None
            self._tools = listed
        return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call ``tool``; a timeout cancels it on the server; a dead server is reported."""
        client = await self._ensure()
        try:
            async with asyncio.timeout(self.timeout):
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            raise McpError(
                f"MCP tool {tool!r} of server {self.name!r} timed out after {self.timeout:g} s "
                "and was cancelled"
            ) from None
        except Exception as exc:
            raise self._failed(f"calling {tool!r}", exc) from None

    def _failed(self, doing: str, exc: BaseException) -> McpError:
        """A failure of the connection: mark the server crashed so the next use restarts it."""
        alive = self._task is not None and not self._task.done()
        self.state, self.error = "crashed", _reason(exc)
        self._stop.set()
        self._client, self._tools = None, None
        how = "failed" if alive else "stopped (crashed?)"
        return McpError(
            f"MCP server {self.name!r} {how} while {doing}: {self.error}; "
            "it will be restarted on next use"
        )

    def _bind_loop(self) -> None:
        """A new event loop (a library user's second ``asyncio.run``) starts afresh: the
        old loop's end cancelled the connection task, which stopped the server."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._lock, self._stop = loop, asyncio.Lock(), asyncio.Event()
            self._task, self._client, self._tools = None, None, None
            if self.state == "running":
                self.state = "stopped"

    async def _ensure(self) -> Client:
        self._bind_loop()
        async with self._lock:
            if self._client is not None and self._task is not None and not self._task.done():
                return self._client
            since = time.monotonic() - self._failed_at
            if self.state == "failed" and since < RETRY_AFTER:
                raise McpError(f"MCP server {self.name!r} did not start: {self.error} "
                               f"(next try in {RETRY_AFTER - since:.0f} s)")  # fmt: skip
            await self._join()
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            self.starts += 1
            self._task = asyncio.create_task(self._serve(ready), name=f"mcp:{self.name}")
            waiter = asyncio.ensure_future(ready.wait())
            try:
                await asyncio.wait({waiter, self._task}, timeout=START_TIMEOUT,
                                   return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            finally:
                waiter.cancel()
            if self._client is None:
                if not self._task.done():
                    self.error = f"no answer within {START_TIMEOUT:g} s"
                    await self._join()
                self.state, self._failed_at = "failed", time.monotonic()
                raise McpError(
                    f"MCP server {self.name!r} ({self.config.describe()}) did not start: "
                    f"{self.error}"
                )
            return self._client

    async def _serve(self, ready: asyncio.Event) -> None:
        """Own the SDK client from entry to exit (the task anyio's scopes require)."""
        with contextlib.ExitStack() as files:
            errlog = self._errlog(files)
            try:
                async with self._connect(errlog) as client:
                    self._client, self.state, self.error = client, "running", None
                    ready.set()
                    listener = asyncio.create_task(self._listen(client))
                    try:
                        await self._stop.wait()
                    finally:
                        listener.cancel()
                        with contextlib.suppress(BaseException):
                            await listener
                self.state = "stopped"
            except Exception as exc:
                self.state, self.error = "crashed", _reason(exc)
                log.info("MCP server %s stopped: %s", self.name, self.error)
            finally:
                self._client, self._tools = None, None
                release, self._release = self._release, None
                if release is not None:  # its process has ended: the sandbox's placeholders go
                    release()

    def _errlog(self, files: contextlib.ExitStack) -> TextIO | None:
        if self._log_dir is None:
            return None
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return files.enter_context(open(self._log_dir / f"{self.name}.log", "a", encoding="utf-8"))

    def _options(self) -> dict[str, Any]:
        """The SDK client's options, the same for every transport."""
        return {
            "message_handler": self._on_message,
            "cache": None,
            "client_info": types.Implementation(name="retinue", version=retinue_version()),
            "extensions": [TasksClient()],  # a call the server makes a task is polled to its end
        }

    def _connect(self, errlog: TextIO | None) -> Client:
        cfg = expanded(self.config)  # ${VAR}s: only now, for a server allowed to start
        options = self._options()
        if isinstance(cfg, StdioServer):
            cwd = self._cwd / cfg.cwd if cfg.cwd else self._cwd
            started = self._launch.start([cfg.command, *cfg.args], self.placement, cwd=cwd)
            self._release = started.release
            params = StdioServerParameters(
                command=started.argv[0],
                args=started.argv[1:],
                env=safe_environment(os.environ) | cfg.env,
                cwd=cwd,
            )
            transport = stdio_client(params, errlog) if errlog is not None else stdio_client(params)
            return Client(transport, **options)
        assert isinstance(cfg, HttpServer)
        if cfg.type == "sse":
            return Client(sse_client(cfg.url, headers=cfg.headers), **options)
        http = create_mcp_http_client(headers=cfg.headers)
        return Client(streamable_http_client(cfg.url, http_client=http), **options)

    async def _listen(self, client: Client) -> None:
        """Tool-list changes on a 2026 connection (older ones send a plain notification)."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    self._tools = None
        except Exception as exc:
            log.debug("MCP server %s: no tool-list changes: %s", self.name, _reason(exc))

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tools = None
        elif isinstance(message, Exception):
            log.debug("MCP server %s: %s", self.name, message)

    async def _join(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def close(self) -> None:
        self._bind_loop()
        async with self._lock:
            await self._join()
            if self.state == "running":
                self.state = "stopped"


class McpHub:
    """Every server this process knows, by name; role-private ones under their role.
    ``placements``: where each ``(role or None, name)`` may start (default ``"own"``)."""

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        cwd: Path,
        log_dir: Path | None = None,
        role_servers: Mapping[str, Mapping[str, ServerConfig]] | None = None,
        placements: Mapping[tuple[str | None, str], Placement] | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self._cwd, self._log_dir = cwd, log_dir
        where: dict[tuple[str | None, str], Placement] = dict(placements or {})

        def server(role: str | None, name: str, config: ServerConfig) -> McpServer:
            return McpServer(name, config, cwd=cwd, log_dir=log_dir, data_dir=data_dir,
                             placement=where.get((role, name), "own"))  # fmt: skip

        self.servers = {n: server(None, n, c) for n, c in servers.items()}
        self._private = {
            role: {n: server(role, n, c) for n, c in defs.items()}
            for role, defs in (role_servers or {}).items()
        }

    def visible(self, role: str) -> dict[str, McpServer]:
        """The servers an agent of ``role`` may see: the configured ones, the role's own
        inline ones (which win on a name clash)."""
        return {**self.servers, **self._private.get(role, {})}

    def all(self) -> list[tuple[str | None, McpServer]]:
        """``(role or None for shared, server)`` for every server."""
        shared: list[tuple[str | None, McpServer]] = [(None, s) for s in self.servers.values()]
        return shared + [(r, s) for r, defs in self._private.items() for s in defs.values()]

    def __bool__(self) -> bool:
        return bool(self.servers or self._private)

    async def close(self) -> None:
        """Stop every server; safe to call twice."""
        await asyncio.gather(*(s.close() for _, s in self.all()), return_exceptions=True)
