"""The embedded store: conversations, the journal, task lists and transcripts in one SQLite file.

One connection per database in WAL mode (readers never block the writer, a killed process
loses nothing committed), guarded by a lock and driven from worker threads, so one store
serves many asyncio tasks; several processes may open the same file. The schema
(:mod:`retinue.store.sqlite_schema`) is brought up to date on open. Each kind of record has
its own class on the shared connection (:class:`~retinue.store.sqlite_conversations.
SQLiteConversations`, ...); images and PDFs of conversations are files beside the database
(:class:`~retinue.store.media.MediaStore`). Agents' memory (blocks, passages) lives in the
same file: :class:`~retinue.memory.sqlite.SQLiteMemory` is this store with memory on top.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from retinue.config import create_private_file, make_private_dir
from retinue.errors import MemoryStoreError
from retinue.store.blobs import SQLiteBlobs
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES, MediaStore
from retinue.store.sqlite_conversations import SQLiteConversations
from retinue.store.sqlite_journal import SQLiteJournal
from retinue.store.sqlite_schema import migrate
from retinue.store.sqlite_transcripts import SQLiteTranscripts
from retinue.store.tasks import SQLiteTasks

__all__ = ["SQLiteStore"]


class SQLiteStore:
    """Every tenant's conversations, durable sessions, task lists and transcripts in one
    SQLite database at ``path`` (created 0600 in a 0700 folder)."""

    def __init__(self, path: Path, *, media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:  # conversations and memory are the user's alone: a new folder 0700, files 0600
            make_private_dir(path.parent)
            create_private_file(path)  # SQLite gives the -wal and -shm files this file's mode
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            migrate(self._conn)
        except (sqlite3.Error, OSError) as exc:
            raise MemoryStoreError(f"cannot open memory database {path}: {exc}") from None
        self.media = MediaStore(path.parent / "media", media_max_bytes)
        """The images and PDFs of stored conversations, out of their rows."""
        self.conversations = SQLiteConversations(self._tx, self._read, self.media)
        """The main agent's stored conversations (a ``ConversationStore``), in this file."""
        self.tasks = SQLiteTasks(self._tx, self._read)
        """The teams' shared task lists (a ``TaskStore``), in this file."""
        self.journal = SQLiteJournal(self._tx, self._read)
        """Durable sessions' records and histories (a ``SessionJournal``), in this file."""
        self.transcripts = SQLiteTranscripts(self._tx, self._read)
        """Ended sessions' transcripts (a ``TranscriptStore``), in this file."""
        self.blobs = SQLiteBlobs(self._tx, self._read)
        """Content kept by reference for Temporal's payloads (a ``BlobStore``), per tenant."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it commits, or none of it."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"memory database is not writable: {exc}") from None
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise MemoryStoreError(f"memory write failed: {exc}") from None

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"memory read failed: {exc}") from None
