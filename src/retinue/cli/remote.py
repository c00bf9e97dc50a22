"""``retinue serve`` runs the HTTP service; ``retinue sessions`` and ``retinue interrupt``
inspect and interrupt its live interactive sub-agent sessions over HTTP.

Heavy imports (uvicorn, the server, httpx) stay inside the commands so ``retinue --help`` is
fast. A server that cannot be reached, or that answers with an error, is one line on stderr
and exit code 1.

The service needs a bearer token (see :mod:`retinue.server.security`): ``serve`` creates
``<data dir>/server-token`` on first start and refuses a non-loopback ``--host`` unless a
token already exists (that file, or ``RETINUE_TOKEN``); the client commands send
``--token`` / ``RETINUE_TOKEN``, or that file's token.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import typer

from retinue.cli.common import (
    ModelOpt,
    PermissionOpt,
    TenantOpt,
    WorkspaceOpt,
    fail,
    make_runtime,
    one_line_errors,
    port_option,
)
from retinue.cli.term import echo

if TYPE_CHECKING:
    import httpx

    from retinue.cli.worker import TemporalTarget

__all__ = ["DEFAULT_URL", "interrupt", "serve", "sessions"]

DEFAULT_URL = "http://127.0.0.1:8765"

UrlOpt = Annotated[
    str, typer.Option("--url", envvar="RETINUE_URL", help="the retinue server to talk to")
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="RETINUE_TOKEN",
        show_envvar=False,
        help="the server's bearer token (default: the data directory's server-token)",
    ),
]


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, port_option("port to listen on (0: any free port)")] = 8765,
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no event log on stderr")] = False,
    permission_mode: PermissionOpt = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(help="a Host name clients may use besides the loopback ones ('*': any)"),
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="an Origin allowed cross-site (CORS); none by default")
    ] = None,
    max_body: Annotated[
        int | None, typer.Option(min=1, help="largest request body in bytes [default: 1000000]")
    ] = None,
    max_media_body: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="largest body, in bytes, of the routes that take images and PDFs "
            "[default: 67108864]",
        ),
    ] = None,
    max_turns: Annotated[int, typer.Option(min=1, help="turns in progress at once")] = 16,
    idle_timeout: Annotated[
        float, typer.Option(min=1, help="seconds before an idle conversation is evicted")
    ] = 3600,
    lease: Annotated[
        float,
        typer.Option(
            min=0.1, help="seconds a worker's unrenewed hold on a conversation lasts (PostgreSQL)"
        ),
    ] = 30.0,
    durable_sessions: Annotated[
        bool | None,
        typer.Option(
            "--durable-sessions/--no-durable-sessions",
            help="record every session at each step: sessions and paused turns survive a "
            "restart and move between workers [default: durable_sessions in config.toml, "
            "else off]",
        ),
    ] = None,
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal",
            metavar="ADDRESS",
            help="be a stateless front end over conversations that run as workflows on this "
            "Temporal server (host:port), served by `retinue worker --temporal` "
            "[default: [temporal] address in config.toml, else none]",
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="the Temporal namespace [default: default]")
    ] = None,
    task_queue: Annotated[
        str | None, typer.Option(help="the workers' Temporal task queue [default: retinue]")
    ] = None,
) -> None:
    """Serve the main agent over HTTP (conversations, SSE progress, live sessions)."""
    from retinue.cli.worker import resolve
    from retinue.config import Settings

    with one_line_errors():
        configured = Settings.load(workspace=workspace, tenant=tenant).temporal
    target = resolve(temporal, namespace, task_queue, configured)
    if target is not None:
        _serve_front(target, max_turns, host, port, workspace, tenant, allow_host, cors_origin,
                     max_body)  # fmt: skip
        return
    import uvicorn

    from retinue.engine.collector import tune_for_serving
    from retinue.server import create_app
    from retinue.server.conversations import Limits
    from retinue.server.security import DEFAULT_MAX_BODY, DEFAULT_MAX_MEDIA_BODY, Security
    from retinue.server.tokens import TokenBook

    with one_line_errors():
        runtime = make_runtime(
            model, workspace, tenant, quiet=quiet, permission_mode=permission_mode
        )
    if durable_sessions is not None:
        runtime.settings.durable_sessions = durable_sessions
    token = _serve_token(runtime.settings.home, host)
    security = Security.build(
        token,
        listen_host=host,
        allow_hosts=allow_host or (),
        cors_origins=cors_origin or (),
        max_body=max_body or DEFAULT_MAX_BODY,
        tokens=TokenBook(runtime.settings.home),  # named tokens: `retinue token issue`
        max_media_body=max_media_body or DEFAULT_MAX_MEDIA_BODY,
    )
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    echo(f"retinue serving {runtime.model.name} on http://{host}:{bound}", err=True)
    _say_how_to_use(runtime.settings.home, f"http://{host}:{bound}")
    limits = Limits(max_turns=max_turns, idle_s=idle_timeout, lease_s=lease)
    app = create_app(runtime, security, limits)
    tune_for_serving()  # this process serves many sessions: see retinue.engine.collector
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


def _serve_front(
    target: TemporalTarget,
    max_turns: int,
    host: str,
    port: int,
    workspace: Path | None,
    tenant: str | None,
    allow_host: list[str] | None,
    cors_origin: list[str] | None,
    max_body: int | None,
) -> None:
    """``serve --temporal``: the service's front door before a Temporal front end, with the
    memory store the settings name (the workers': their transcripts, their blobs)."""
    from importlib.util import find_spec

    if find_spec("temporalio") is None:
        fail("--temporal needs the temporal extra: pip install 'retinue[temporal]'")
    from retinue.cli.serve_temporal import serve_temporal
    from retinue.config import Settings
    from retinue.memory import open_store
    from retinue.server.security import DEFAULT_MAX_BODY, Security
    from retinue.server.tokens import TokenBook

    with one_line_errors():
        settings = Settings.load(workspace=workspace, tenant=tenant)
        memory = open_store(settings.home, settings.database_url,
                            media_max_bytes=settings.media_max_bytes)  # fmt: skip
    token = _serve_token(settings.home, host)
    security = Security.build(
        token, listen_host=host, allow_hosts=allow_host or (), cors_origins=cors_origin or (),
        max_body=max_body or DEFAULT_MAX_BODY, tokens=TokenBook(settings.home),
    )  # fmt: skip
    sock = _listen(host, port)
    url = f"http://{host}:{sock.getsockname()[1]}"
    echo(f"retinue serving Temporal {target.address} ({target.namespace}/"
         f"{target.task_queue}) on {url}", err=True)  # fmt: skip
    _say_how_to_use(settings.home, url)
    serve_temporal(target, max_turns=max_turns, tenant=settings.tenant, sock=sock,
                   security=security, memory=memory,
                   tracing=(settings.otel_endpoint, settings.otel_capture_content))  # fmt: skip


def _serve_token(home: Path, host: str) -> str:
    """The service's token (created on a loopback start); exit 1 when a public host has none."""
    from retinue.server.security import (
        TOKEN_ENV,
        TOKEN_FILE,
        configured_token,
        ensure_token,
        is_loopback,
    )

    if not is_loopback(host) and configured_token(home) is None:
        fail(
            f"refusing to listen on {host} without a token: set {TOKEN_ENV}, or create "
            f"{home / TOKEN_FILE} (mode 0600) by starting `retinue serve` once on 127.0.0.1"
        )
    try:
        return ensure_token(home)[0]
    except OSError as exc:
        fail(f"cannot create the token file in {home}: {exc.strerror or exc}")


def _say_how_to_use(home: Path, url: str) -> None:
    from retinue.server.security import TOKEN_ENV, TOKEN_FILE

    if os.environ.get(TOKEN_ENV, "").strip():
        where = f"${TOKEN_ENV}"
    else:
        where = f"$(cat {home / TOKEN_FILE})"
    echo(
        f'every request but /healthz needs: -H "Authorization: Bearer {where}" '
        f"(e.g. curl -H ... {url}/v1/conversations)",
        err=True,
    )
    echo(f"web page: {url}/ (sign in with the same token)", err=True)


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
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(True)
    return sock


def sessions(
    action: Annotated[
        str | None,
        typer.Argument(help="show ID: one ended session's transcript; search TEXT: find them"),
    ] = None,
    what: Annotated[str | None, typer.Argument(help="the transcript id, or the text")] = None,
    url: UrlOpt = DEFAULT_URL,
    parent: Annotated[
        str | None, typer.Option("--parent", help="only the sessions this agent id holds")
    ] = None,
    ended: Annotated[
        bool, typer.Option("--ended", help="the ended sessions whose transcripts are kept")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
    token: TokenOpt = None,
) -> None:
    """List the live interactive sub-agent sessions of a running `retinue serve`, with each
    one's task list (TodoWrite) where it keeps one, then the shared task list of each tree
    (TaskCreate, TaskUpdate: a team's), and (durable sessions) the sessions recorded but not
    loaded in that process. With --ended, `show ID` or `search TEXT`: the transcripts of
    ended sessions kept in this data directory (`retinue run`'s, `chat`'s and `serve`'s)."""
    if ended or action is not None:
        _transcripts(action, what, ended=ended, as_json=as_json)
        return
    from rich.table import Table

    from retinue.cli.render import parse_todos, task_table, todos_cell
    from retinue.cli.term import console as make_console
    from retinue.cli.term import escape
    from retinue.telemetry.prices import format_cost

    params = {"parent": parent} if parent else None
    answer = _call("GET", url, "/v1/sessions", token=token, params=params)
    live: list[dict[str, Any]] = answer["sessions"]
    lists: dict[str, Any] = answer.get("tasks") or {}
    recorded: list[dict[str, Any]] = answer.get("recorded") or []
    if as_json:
        more = {"tasks": lists} if lists else {}
        more |= {"recorded": recorded} if recorded else {}
        echo(json.dumps({"sessions": live, **more} if more else live, indent=2))
        return
    console = make_console()
    for team, tasks in lists.items():  # (the service's JSON: model-written text, escaped)
        if isinstance(tasks, list):
            console.print(task_table(str(team), [t for t in tasks if isinstance(t, dict)]))
    if recorded:
        console.print(_recorded_table(recorded))
    if not live:
        console.print("no live sessions")
        return
    table = Table()  # the ids are never cut: `retinue interrupt` needs them whole
    table.add_column("id", no_wrap=True, min_width=max(len(str(s["id"])) for s in live))
    for header in ("role", "state", "turns", "tokens", "cost", "tasks", "last reply"):
        whole = header in ("role", "state", "turns", "cost")  # short: never cut or wrapped
        table.add_column(header, no_wrap=whole, ratio=1 if header == "last reply" else None)
    for s in live:
        table.add_row(
            escape(str(s["id"])),
            escape(str(s["role"])),
            escape(_state(s)),
            str(s["turns"]),
            _tokens(s),
            format_cost(s.get("cost_usd")),
            todos_cell(parse_todos(s.get("todos"))),
            escape(_one_line(str(s["last_reply"]))),
        )
    console.print(table)


def _tokens(session: dict[str, Any]) -> str:
    """A session's tokens (in and out), or ``unknown`` where the server does not count them
    (``retinue serve --temporal``'s sessions: null)."""
    if session.get("tokens") is None:
        return "unknown"
    return f"{session['tokens']} ({session['input_tokens']} in / {session['output_tokens']} out)"


def _transcripts(action: str | None, what: str | None, *, ended: bool, as_json: bool) -> None:
    from retinue.cli import transcripts

    if action is None or (ended and action == "list"):
        transcripts.ended(as_json=as_json)
    elif action in ("show", "search") and what:
        (transcripts.show if action == "show" else transcripts.search)(what, as_json=as_json)
    else:
        fail("use: retinue sessions --ended | show ID | search TEXT")


def _recorded_table(recorded: list[dict[str, Any]]) -> Any:
    """Durable sessions recorded but not loaded in the service's process (a message or an
    answer to one loads its tree)."""
    from rich.table import Table

    from retinue.cli.term import escape

    table = Table(title="recorded, not loaded (durable sessions)")
    table.add_column("id", no_wrap=True)
    for header in ("role", "state", "turns", "question"):
        table.add_column(header, no_wrap=header != "question")
    for s in recorded:
        table.add_row(
            escape(str(s.get("id"))),
            escape(str(s.get("role"))),
            escape(str(s.get("state"))),
            str(s.get("turns")),
            escape(_one_line(str(s.get("question") or ""))),
        )
    return table


def interrupt(
    session_id: Annotated[
        str, typer.Argument(metavar="SESSION_ID", help="the session id, e.g. conv-a/researcher")
    ],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Interrupt the running turn of a live session; the session itself stays."""
    path = f"/v1/sessions/{quote(session_id, safe='/:@')}/interrupt"
    answer = _call("POST", url, path, token=token)
    if answer["interrupted"]:
        echo(f"interrupted the running turn of {session_id}; the session is kept")
    else:
        echo(f"{session_id} has no running turn; nothing to interrupt")


def _state(session: dict[str, Any]) -> str:
    """The state, with what it asks and how often it was steered."""
    state = str(session["state"])
    if session.get("question"):
        state += f": {_one_line(str(session['question']), 40)}"
    return state + (f" (steered {session['steered']}×)" if session.get("steered") else "")


def _one_line(text: str, limit: int = 60) -> str:
    from retinue.cli.render import one_line

    return one_line(text, limit)


def _call(method: str, url: str, path: str, *, token: str | None, **kwargs: Any) -> Any:
    """One request to the server; its JSON answer, or one line on stderr and exit 1."""
    import httpx

    from retinue.config import default_home
    from retinue.server.security import configured_token

    base = url.rstrip("/")
    token = token or configured_token(default_home())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, base + path, timeout=30, headers=headers, **kwargs)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        fail(f"no retinue server at {base}; start one with `retinue serve`")
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        fail(f"bad --url {url!r}: expected something like {DEFAULT_URL}")
    except httpx.HTTPError as exc:
        fail(f"request to {base} failed: {type(exc).__name__}: {exc}")
    if response.status_code == 401:
        fail(
            f"{base} refused the token: pass --token or set RETINUE_TOKEN "
            "(the server's token is in its data directory, file server-token)"
        )
    if response.is_error:
        fail(f"{base} answered {response.status_code}: {_error_text(response)}")
    try:
        return response.json()
    except ValueError:
        fail(f"{base} did not answer with JSON; is it a retinue server?")


def _error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return _one_line(response.text, 200) or response.reason_phrase
