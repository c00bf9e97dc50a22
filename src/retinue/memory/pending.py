"""Transcripts of consolidations that have not been written yet, kept on disk.

Before a consolidation calls the model, the session's conversation is written to
``<home>/pending/<run_id>.inflight.json``; it is deleted once the result is committed, and
renamed to ``<run_id>.failed.json`` when the consolidation gives up. A process killed in
between leaves the ``inflight`` file behind. ``retinue memory retry`` re-runs failed
transcripts, and inflight ones old enough that their process must be gone. Nothing a session
learned is lost on the way to the database.

Every file is written atomically (a ``.tmp`` file, ``fsync``, rename, ``fsync`` of the
folder). A process killed after the ``fsync`` but before the rename leaves a complete
``.tmp`` file: :meth:`PendingStore.ready` finishes its rename, so it is retried as well; an
incomplete one (killed mid-write) held nothing the database needs and is removed once stale.
Text is scrubbed of lone surrogates before it is written.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retinue.config import make_private_dir
from retinue.messages import Message, from_dict, to_dict
from retinue.store.text import scrub

__all__ = ["PendingStore", "PendingTranscript"]

_INFLIGHT = ".inflight.json"
_FAILED = ".failed.json"
_TMP = ".tmp"

log = logging.getLogger("retinue.memory")


@dataclass(frozen=True, slots=True)
class PendingTranscript:
    """One kept transcript: who it belongs to, the model that was asked, and the messages."""

    run_id: str
    tenant: str
    role: str
    session_id: str
    model: str
    messages: list[Message]
    path: Path
    error: str = ""


class PendingStore:
    """The ``pending/`` folder of the data directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write_inflight(
        self,
        *,
        run_id: str,
        tenant: str,
        role: str,
        session_id: str,
        model: str,
        messages: Sequence[Message],
    ) -> Path:
        data = {
            "run_id": run_id,
            "tenant": tenant,
            "role": role,
            "session_id": session_id,
            "model": model,
            "created_at": time.time(),
            "error": "",
            "messages": [to_dict(m) for m in messages],
        }
        path = self.root / f"{run_id}{_INFLIGHT}"
        self._write(path, data)
        return path

    def mark_failed(self, path: Path, error: str) -> Path:
        """Record why the consolidation failed and make the transcript ready for retry."""
        data = json.loads(path.read_text(encoding="utf-8"))
        data["error"] = error
        target = path.with_name(path.name.removesuffix(_INFLIGHT).removesuffix(_FAILED) + _FAILED)
        self._write(target, data)
        if target != path:
            path.unlink(missing_ok=True)
        return target

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def ready(self, *, stale_after: float = 3600.0) -> list[PendingTranscript]:
        """Failed transcripts, and inflight ones untouched for ``stale_after`` seconds.

        Complete leftovers of an interrupted write are renamed into place first; one
        transcript per run (a failed one is preferred to its inflight twin).
        """
        if not self.root.is_dir():
            return []
        now = time.time()
        self._finish_leftovers(now, stale_after)
        by_run: dict[str, PendingTranscript] = {}
        for path in sorted(self.root.iterdir(), key=lambda p: (not p.name.endswith(_FAILED), p)):
            failed = path.name.endswith(_FAILED)
            if not failed and not (
                path.name.endswith(_INFLIGHT) and now - path.stat().st_mtime >= stale_after
            ):
                continue
            try:
                item = self.load(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("cannot read kept transcript %s: %s", path, exc)
                continue
            if item.run_id in by_run:
                path.unlink(missing_ok=True)  # the same run, kept twice by an interrupted rename
                continue
            by_run[item.run_id] = item
        return list(by_run.values())

    def _finish_leftovers(self, now: float, stale_after: float) -> None:
        """Rename complete stale ``.tmp`` files into place; drop incomplete stale ones."""
        for tmp in self.root.glob(f"*{_TMP}"):
            try:
                if now - tmp.stat().st_mtime < stale_after:
                    continue  # maybe still being written
                json.loads(tmp.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                log.warning("removing incomplete transcript leftover %s", tmp)
                tmp.unlink(missing_ok=True)
                continue
            target = tmp.with_name(tmp.name.removesuffix(_TMP))
            if not target.exists():
                os.replace(tmp, target)
            else:
                tmp.unlink(missing_ok=True)

    def load(self, path: Path) -> PendingTranscript:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return PendingTranscript(
            run_id=str(data["run_id"]),
            tenant=str(data["tenant"]),
            role=str(data["role"]),
            session_id=str(data["session_id"]),
            model=str(data.get("model", "")),
            messages=[from_dict(m) for m in data["messages"]],
            path=path,
            error=str(data.get("error", "")),
        )

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        make_private_dir(self.root)  # transcripts are the user's alone: 0700, files 0600
        tmp = path.with_name(path.name + _TMP)
        text = scrub(json.dumps(data, ensure_ascii=False))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
