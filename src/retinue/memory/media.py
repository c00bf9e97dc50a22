"""Deprecated alias of :mod:`retinue.store.media` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.media import (
    DEFAULT_MEDIA_MAX_BYTES,
    MediaRoom,
    MediaStore,
    MediaStoreFull,
    references,
    restore,
    stash,
    too_full,
)

__all__ = [
    "DEFAULT_MEDIA_MAX_BYTES",
    "MediaRoom",
    "MediaStore",
    "MediaStoreFull",
    "references",
    "restore",
    "stash",
    "too_full",
]
