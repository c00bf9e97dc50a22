"""The cyclic garbage collector's settings for a process that serves many sessions.

CPython starts a young-generation collection every 700 new container objects. A turn waiting
on its model holds a few dozen (its coroutine, futures, callbacks), and with thousands of
turns in flight each young collection finds them alive and promotes them; the promoted
objects then trigger full collections, each of which walks every live session. So the CPU a
model call costs grew with the number of sessions (benchmarks/sessions.py: about 1.7x from
1,000 to 10,000 sessions). With a young threshold of :data:`YOUNG_THRESHOLD` most turns finish
before a collection sees them, and the cost stays flat (``benchmarks/RESULTS.md``, section 3).
Cyclic garbage lives a little longer before it is freed; reference counting frees the rest as
before. ``retinue serve`` owns its process and sets it; a program that embeds the library
keeps its own settings unless it calls :func:`tune_for_serving` itself.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_for_serving"]

YOUNG_THRESHOLD = 10_000
"""New container objects between two young-generation collections in a serving process."""


def tune_for_serving() -> tuple[int, int, int]:
    """Raise the young-generation threshold to at least :data:`YOUNG_THRESHOLD` (the older
    generations' thresholds are kept); returns the settings before, to restore them."""
    before = gc.get_threshold()
    young, older, oldest = before
    gc.set_threshold(max(young, YOUNG_THRESHOLD), older, oldest)
    return before
