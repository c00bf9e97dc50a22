"""What Temporal workers remove from the store they share, every hour.

In process, a session's close prunes old transcripts now and then
(:class:`~retinue.engine.transcripts.TranscriptKeeper`) and nothing keeps blobs. Workers
keep both: the transcripts of sessions their workflows closed, and the content their
activities keep by reference (:mod:`retinue.store.blobs`). :meth:`Sweep.forever`, run by
:func:`~retinue.temporal.worker.run_worker` beside its worker, removes every hour:

- its tenant's blobs not used for ``blob_retention_days`` (why none in use goes: the
  module :mod:`retinue.store.blobs`; 0: none is removed);
- the transcripts that ended more than ``transcript_retention_days`` ago, as the keeper
  prunes them (where none are kept, 0, those kept before stay, as in process).

Each part is one store call; one that fails is logged and done again the next hour, and
the other part is done all the same. Several workers sweeping one store do the same work
twice, harmlessly. Cancelling the sweep stops it between two of the store's transactions:
what was removed is removed, nothing is half done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import NoReturn

from retinue.engine.transcripts import TranscriptKeeper
from retinue.runtime import Runtime
from retinue.store.blobs import BlobStore, HoldsBlobs

__all__ = ["SWEEP_EVERY", "Sweep", "Swept"]

log = logging.getLogger("retinue.temporal.sweep")

SWEEP_EVERY = 3600.0
"""Seconds between two sweeps of one worker."""

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Swept:
    """What one sweep removed: blobs and transcripts (None: not swept, off or failed)."""

    blobs: int | None
    transcripts: int | None


@dataclass(frozen=True, slots=True)
class Sweep:
    """A worker's sweep: its store's blobs and its transcript keeper's store."""

    blobs: BlobStore | None
    blob_retention_days: float
    transcripts: TranscriptKeeper | None
    tenant: str | None = None  # whose blobs (None: every tenant's)

    @classmethod
    def of(cls, runtime: Runtime) -> Sweep:
        """The sweep of ``runtime``'s store, with its settings' retentions."""
        memory = runtime.memory
        blobs = memory.blobs if isinstance(memory, HoldsBlobs) else None
        days = runtime.settings.blob_retention_days
        return cls(blobs, days, runtime.manager.transcripts, runtime.settings.tenant)

    async def once(self, now: float) -> Swept:
        """Remove what is past its retention at ``now`` (Unix seconds); never raises an
        ``Exception`` (a part that fails is logged)."""
        blobs = transcripts = None
        if self.blobs is not None and self.blob_retention_days > 0:
            cutoff = now - self.blob_retention_days * DAY
            blobs = await _logged("blobs", self.blobs.prune(cutoff, self.tenant))
        if (keeper := self.transcripts) is not None:
            cutoff = now - keeper.retention_days * DAY
            transcripts = await _logged("transcripts", keeper.store.prune(cutoff))
        return Swept(blobs, transcripts)

    async def forever(self, every: float = SWEEP_EVERY) -> NoReturn:
        """Sweep now, then every ``every`` seconds, until cancelled."""
        while True:
            swept = await self.once(time.time())
            if swept.blobs or swept.transcripts:
                log.info("swept %s blobs, %s transcripts", swept.blobs, swept.transcripts)
            await asyncio.sleep(every)


async def _logged(what: str, work: Awaitable[int]) -> int | None:
    """``work``'s count, or None where it failed (logged: the next sweep does it again)."""
    try:
        return await work
    except Exception:
        log.warning("could not sweep old %s (tried again in the next sweep)", what, exc_info=True)
        return None
