"""``retinue serve`` runs the HTTP service; ``retinue sessions`` and ``retinue interrupt``
inspect and interrupt its live interactive sub-agent sessions over HTTP.

Heavy imports (uvicorn, the server, httpx) stay inside the commands so ``retinue --help`` is
fast. A server that cannot be reached, or that answers with an error, is one line on stderr
and exit code 1.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from urllib.parse import quote

import typer

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_URL", "interrupt", "serve", "sessions"]

DEFAULT_URL = "http://127.0.0.1:8765"

UrlOpt = Annotated[
    str, typer.Option("--url", envvar="RETINUE_URL", help="the retinue server to talk to")
]


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = 8765,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="provider:model (default: RETINUE_MODEL)")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="workspace root (default: cwd)")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="whose memory to use")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no event log on stderr")] = False,
) -> None:
    """Serve the main agent over HTTP (conversations, SSE progress, live sessions)."""
    import uvicorn

    from retinue.cli.app import _one_line_errors, _runtime
    from retinue.server import create_app

    with _one_line_errors():
        runtime = _runtime(model, workspace, tenant, quiet=quiet)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    typer.echo(f"retinue serving {runtime.model.name} on http://{host}:{bound}", err=True)
    config = uvicorn.Config(create_app(runtime), log_level="warning", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, or one line on stderr and exit 1."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections made before uvicorn runs wait instead of failing
    except OSError as exc:
        sock.close()
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(True)
    return sock


def sessions(
    url: UrlOpt = DEFAULT_URL,
    parent: Annotated[
        str | None, typer.Option("--parent", help="only the sessions this agent id holds")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """List the live interactive sub-agent sessions of a running `retinue serve`."""
    from rich.console import Console
    from rich.table import Table

    params = {"parent": parent} if parent else None
    live: list[dict[str, Any]] = _call("GET", url, "/v1/sessions", params=params)["sessions"]
    if as_json:
        typer.echo(json.dumps(live, indent=2))
        return
    console = Console()
    if not live:
        console.print("no live sessions", highlight=False)
        return
    table = Table("id", "role", "state", "turns", "tokens", "last reply")
    for s in live:
        table.add_row(
            s["id"],
            s["role"],
            s["state"],
            str(s["turns"]),
            f"{s['tokens']} ({s['input_tokens']} in / {s['output_tokens']} out)",
            _one_line(s["last_reply"]),
        )
    console.print(table)


def interrupt(
    session_id: Annotated[str, typer.Argument(help="the session id, e.g. conv-a/researcher")],
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Interrupt the running turn of a live session; the session itself stays."""
    path = f"/v1/sessions/{quote(session_id, safe='/:@')}/interrupt"
    answer = _call("POST", url, path)
    if answer["interrupted"]:
        typer.echo(f"interrupted the running turn of {session_id}; the session is kept")
    else:
        typer.echo(f"{session_id} has no running turn; nothing to interrupt")


def _one_line(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _fail(message: str) -> NoReturn:
    from retinue.cli.app import EXIT_FAILED, _err

    _err(message)
    raise typer.Exit(EXIT_FAILED)


def _call(method: str, url: str, path: str, **kwargs: Any) -> Any:
    """One request to the server; its JSON answer, or one line on stderr and exit 1."""
    import httpx

    base = url.rstrip("/")
    try:
        response = httpx.request(method, base + path, timeout=30, **kwargs)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        _fail(f"no retinue server at {base}; start one with `retinue serve`")
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        _fail(f"bad --url {url!r}: expected something like {DEFAULT_URL}")
    except httpx.HTTPError as exc:
        _fail(f"request to {base} failed: {type(exc).__name__}: {exc}")
    if response.is_error:
        _fail(f"{base} answered {response.status_code}: {_error_text(response)}")
    try:
        return response.json()
    except ValueError:
        _fail(f"{base} did not answer with JSON; is it a retinue server?")


def _error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return _one_line(response.text, 200) or response.reason_phrase
