"""Deprecated alias of :mod:`retinue.store.pg_transcripts` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.pg_transcripts import PgTranscripts

__all__ = ["PgTranscripts"]
