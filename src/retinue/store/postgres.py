"""The shared store: conversations, the journal, task lists and transcripts in PostgreSQL.

For deployments that outgrow one machine: several ``retinue serve`` workers open the same
database. The driver is psycopg 3 with ``psycopg_pool.AsyncConnectionPool`` rather than
asyncpg: native asyncio *and* a synchronous API in one library (the test server helper uses
the latter), libpq underneath (every ``postgresql://`` URL option, ``PG*`` variable, SSL mode
and ``.pgpass`` works as in ``psql``), the project's own ``postgres`` extra, and fast enough
here (the database is not the bottleneck, see ``benchmarks/workers_bench.py``). The pool
opens on first use, so the store is built without an event loop, like the SQLite one; a pool
belongs to the loop that opened it. The schema (:mod:`retinue.store.pg_schema`) is migrated
on that first use. Conversations carry the per-conversation leases that let any worker take
any conversation's next turn (:mod:`retinue.store.pg_conversations`). Agents' memory lives
in the same database: :class:`~retinue.memory.postgres.PostgresMemory` is this store with
memory on top.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from retinue.errors import MemoryStoreError
from retinue.store.blobs import PgBlobs
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES
from retinue.store.pg_conversations import PgConversations
from retinue.store.pg_journal import PgJournal
from retinue.store.pg_media import PgMedia
from retinue.store.pg_schema import enable_pgvector, migrate
from retinue.store.pg_transcripts import PgTranscripts
from retinue.store.tasks import PgTasks

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore", "describe_url", "first_line"]


def describe_url(url: str) -> str:
    """``host:port/dbname`` of a connection URL, never its password (for messages)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:
        return "PostgreSQL (unparsable URL)"
    host, port = info.get("host", "localhost"), info.get("port", 5432)
    return f"PostgreSQL {host}:{port}/{info.get('dbname', '')}"


class PostgresStore:
    """Every tenant's conversations (with leases), durable sessions, task lists and
    transcripts in the PostgreSQL database at ``url``."""

    def __init__(
        self, url: str, *, pool_size: int = 10, media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES
    ) -> None:
        self.url = url
        self.where = describe_url(url)
        self.conversations = PgConversations(self, PgMedia(media_max_bytes))
        """The main agent's stored conversations, with leases for several workers (images
        and PDFs in their own table, :mod:`retinue.store.pg_media`)."""
        self.tasks = PgTasks(self)
        """The teams' shared task lists (a ``TaskStore``), claims atomic across workers."""
        self.journal = PgJournal(self)
        """Durable sessions' records and histories (a ``SessionJournal``), one statement per
        operation."""
        self.transcripts = PgTranscripts(self)
        """Ended sessions' transcripts (a ``TranscriptStore``), searched by ``tsvector``."""
        self.blobs = PgBlobs(self)
        """Content kept by reference for Temporal's payloads (a ``BlobStore``), per tenant."""
        self.pool_size = pool_size
        self.pgvector = False
        """Whether the server has the pgvector extension (archival search uses it)."""
        self._pool: AsyncConnectionPool[AsyncConnection] | None = None
        self._opening = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def pool(self) -> AsyncConnectionPool[AsyncConnection]:
        """The connection pool, opened (and the schema migrated) on first use.

        A pool belongs to the event loop that opened it: used from another loop (code that
        calls ``asyncio.run`` more than once), the store opens a new pool there and leaves
        the old one's connections to be closed with it.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._pool, self._loop, self._opening = None, loop, asyncio.Lock()
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> AsyncConnectionPool[AsyncConnection]:
        """Migrate over one connection first (a refused one fails at once, with its
        reason), then open the pool."""
        import psycopg
        from psycopg import AsyncConnection
        from psycopg_pool import AsyncConnectionPool

        try:
            conn = await AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
            async with conn:
                await migrate(conn)
                self.pgvector = await enable_pgvector(conn)
        except psycopg.Error as exc:
            problem = first_line(exc)
            raise MemoryStoreError(f"cannot open memory database {self.where}: {problem}") from None
        pool = AsyncConnectionPool(
            self.url,
            connection_class=AsyncConnection,
            min_size=1,
            max_size=self.pool_size,
            open=False,
            kwargs={"autocommit": True},
            name="retinue-memory",
        )
        await pool.open()
        return pool

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def close(self) -> None:
        """:meth:`aclose` for code without a loop: closed on the pool's own loop if it still
        runs or can run; a pool whose loop is gone is left to close with the process."""
        pool, loop, self._pool = self._pool, self._loop, None
        if pool is None or loop is None or loop.is_closed():
            return
        if loop.is_running():
            task = loop.create_task(pool.close())
            _closing.add(task)
            task.add_done_callback(_closing.discard)
        else:
            loop.run_until_complete(pool.close(timeout=2.0))

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection (autocommit); database errors become ``MemoryStoreError``."""
        import psycopg

        pool = await self.pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise MemoryStoreError(
                f"memory database {self.where} failed: {first_line(exc)}"
            ) from None

    async def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        async with self.connection() as conn:
            cur = await conn.execute(sql, params)  # pyright: ignore[reportArgumentType]
            return await cur.fetchall()


_closing: set[asyncio.Task[None]] = set()


def first_line(exc: BaseException) -> str:
    """The first line of a driver error (its message), for ours."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
