"""A throwaway PostgreSQL server for the test session (and benchmarks).

``initdb`` into a temporary directory, ``pg_ctl start`` on a free port of 127.0.0.1 with the
Unix socket in that directory too, ``pg_ctl stop`` at the end. The server binaries are looked
up under ``/usr/lib/postgresql/*/bin`` (Debian) and then on ``PATH``. PostgreSQL refuses to
run as root, so under root (CI) they run as the unprivileged ``postgres`` user (``setpriv``),
owning the temporary directory; otherwise they run as the current user. Durability is off
(``fsync=off``): the data is thrown away anyway.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgServer", "find_bin_dir"]


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, newest version first; None if absent."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster; ``url(db)`` connects to database ``db`` as ``postgres``."""

    def __init__(self, bin_dir: Path, *, settings: dict[str, str] | None = None) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="retinue-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.settings = {"fsync": "off", "full_page_writes": "off", **(settings or {})}
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "PostgreSQL refuses to run as root, and there is no 'postgres' user to run "
                    "it as (Debian's postgresql package creates one)"
                ) from None
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}"]
            self._as += ["--clear-groups", "--"]

    def _run(self, *args: str) -> None:
        cmd = [*self._as, str(self.bin_dir / args[0]), *args[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stderr.strip()}\n{tail}")

    def start(self) -> PgServer:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = [f"-p {self.port}", f"-k {self.root}", "-c listen_addresses=127.0.0.1"]
        options += [f"-c {k}={v}" for k, v in self.settings.items()]
        self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
            "-l", str(self.root / "server.log"), "-o", " ".join(options),
        )  # fmt: skip
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` (dropping an older one) and return its URL."""
        import psycopg
        from psycopg import sql

        db = sql.Identifier(name)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(db))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(db))
        return self.url(name)

    def stop(self) -> None:
        try:
            if self.data.exists():
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
