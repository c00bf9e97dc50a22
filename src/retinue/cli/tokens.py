"""``retinue token issue|revoke|list``: the service's named tokens, each one a tenant.

A named token sees only its tenant's conversations, sessions and memory, over every route of
``retinue serve`` (the web page and the OpenAI-compatible endpoint included) and ``retinue
mcp serve --http``; the service's own token (``server-token``) stays the simple default. The
tokens are kept hashed in ``<data dir>/server-tokens.json`` (mode 0600); a running server
reads the file again when it changes (see :mod:`retinue.server.tokens`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retinue.cli.term import echo

if TYPE_CHECKING:
    from retinue.server.tokens import TokenBook

__all__ = ["token_app"]

token_app = typer.Typer(
    name="token",
    help="Named tokens of `retinue serve`: each one a tenant with its own conversations, "
    "sessions and memory.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

HomeOpt = Annotated[
    Path | None,
    typer.Option("--home", help="the data directory (default: RETINUE_HOME or ~/.retinue)"),
]


def _book(home: Path | None) -> TokenBook:
    from retinue.config import default_home
    from retinue.server.tokens import TokenBook

    return TokenBook((home or default_home()).expanduser())


def _fail(message: str) -> typer.Exit:
    from retinue.cli.term import console, escape

    console(stderr=True).print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(1)


@token_app.command("issue")
def issue(
    name: Annotated[str, typer.Argument(help="who the token is for (letters, digits, _ . -)")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="whose things it sees (default: NAME)")
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Make a token for NAME and print it once (only its hash is kept)."""
    from retinue.errors import RetinueError

    book = _book(home)
    try:
        token = book.issue(name, tenant)
    except (RetinueError, OSError) as exc:
        raise _fail(str(exc)) from None
    echo(f"token {name!r} for tenant {tenant or name!r} (shown once, keep it):", err=True)
    echo(token)


@token_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="the token's name")], home: HomeOpt = None
) -> None:
    """Remove the token NAME: a running server refuses it from its next request."""
    from retinue.errors import RetinueError

    try:
        gone = _book(home).revoke(name)
    except (RetinueError, OSError) as exc:
        raise _fail(str(exc)) from None
    echo(f"revoked token {gone.name!r} (tenant {gone.tenant!r})")


@token_app.command("list")
def list_tokens(home: HomeOpt = None) -> None:
    """The named tokens: name, tenant, when issued (never the tokens themselves)."""
    import time

    from retinue.errors import RetinueError

    try:
        tokens = _book(home).tokens()
    except (RetinueError, OSError) as exc:
        raise _fail(str(exc)) from None
    if not tokens:
        echo("no named tokens (the service's own token is in server-token)")
        return
    for t in tokens:
        issued = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created_at))
        echo(f"{t.name}\ttenant {t.tenant}\tissued {issued}")
