"""Named tokens: several users of one service, each token mapped to a tenant.

``retinue token issue NAME [--tenant T]`` makes a token, prints it once, and keeps only its
SHA-256 in ``<data dir>/server-tokens.json`` (mode 0600); ``retinue token revoke NAME``
removes it and ``retinue token list`` shows names and tenants. A running service reads the
file again when it changes, so an issue or a revoke takes effect on the next request.

A token's tenant is whose conversations, sessions and memory it sees (see
:mod:`retinue.server.tenants`); the service's own token (``server-token``, or
``RETINUE_TOKEN``) stays the simple default and is the service's own tenant
(``retinue serve --tenant``, ``default`` unless set).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from retinue.errors import ConfigError

__all__ = [
    "TOKENS_FILE",
    "IssuedToken",
    "Principal",
    "TokenBook",
    "valid_name",
]

TOKENS_FILE = "server-tokens.json"
MAX_TOKENS = 10_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def valid_name(name: str) -> bool:
    """Token and tenant names: 1-64 letters, digits, ``_ . -``, not starting with a sign."""
    return _NAME.fullmatch(name) is not None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from: a named token (``name``) and its tenant, or the service's
    own token (``name`` None, ``tenant`` None: the service's own tenant)."""

    name: str | None = None
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """One named token as the file keeps it (its SHA-256, never the token)."""

    name: str
    tenant: str
    sha256: str
    created_at: float


class TokenBook:
    """The named tokens of a data directory; :meth:`find` rereads the file when it changed."""

    def __init__(self, home: Path) -> None:
        self.path = home / TOKENS_FILE
        self._stamp: tuple[int, int, int] | None = None
        self._by_digest: dict[str, IssuedToken] = {}

    def tokens(self) -> list[IssuedToken]:
        """Every named token, by name."""
        return sorted(self._read().values(), key=lambda t: t.name)

    def find(self, token: str) -> Principal | None:
        """The principal of ``token``, or None if no named token is it."""
        self._refresh()
        issued = self._by_digest.get(_digest(token))
        return Principal(issued.name, issued.tenant) if issued is not None else None

    def issue(self, name: str, tenant: str | None = None) -> str:
        """A new token for ``name`` (its tenant: ``tenant``, else the name); the token is
        returned once and only its digest is kept. Raises ConfigError for a bad or taken
        name."""
        tenant = tenant or name
        for what, value in (("token name", name), ("tenant", tenant)):
            if not valid_name(value):
                raise ConfigError(f"bad {what} {value!r}: use 1-64 letters, digits, '_', '.', '-'")
        tokens = self._read()
        if name in tokens:
            raise ConfigError(f"a token named {name!r} exists: revoke it first")
        if len(tokens) >= MAX_TOKENS:
            raise ConfigError(f"{MAX_TOKENS} tokens are issued already: revoke some first")
        token = secrets.token_urlsafe(32)
        tokens[name] = IssuedToken(name, tenant, _digest(token), time.time())
        self._write(tokens)
        return token

    def revoke(self, name: str) -> IssuedToken:
        """Remove the token ``name``; raises ConfigError if there is none."""
        tokens = self._read()
        gone = tokens.pop(name, None)
        if gone is None:
            known = ", ".join(sorted(tokens)) or "none"
            raise ConfigError(f"no token named {name!r} (tokens: {known})")
        self._write(tokens)
        return gone

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self._by_digest = None, {}
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            try:
                tokens = self._read()
            except ConfigError:
                tokens = {}  # a broken file grants nothing (the CLI says what is wrong)
            self._stamp = stamp
            self._by_digest = {t.sha256: t for t in tokens.values()}

    def _read(self) -> dict[str, IssuedToken]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {self.path}: {exc}") from None
        try:
            found = [IssuedToken(str(t["name"]), str(t["tenant"]), str(t["sha256"]),
                                 float(t["created_at"])) for t in raw["tokens"]]  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{self.path} is not a token file ({exc})") from None
        return {t.name: t for t in found if valid_name(t.name) and valid_name(t.tenant)}

    def _write(self, tokens: dict[str, IssuedToken]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = {
            "tokens": [
                {"name": t.name, "tenant": t.tenant, "sha256": t.sha256, "created_at": t.created_at}
                for t in sorted(tokens.values(), key=lambda t: t.name)
            ]
        }
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".server-tokens", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), 0o600)
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
