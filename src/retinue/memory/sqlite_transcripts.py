"""Deprecated alias of :mod:`retinue.store.sqlite_transcripts` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.sqlite_transcripts import SUMMARY_COLUMNS, SQLiteTranscripts, summary_of

__all__ = ["SUMMARY_COLUMNS", "SQLiteTranscripts", "summary_of"]
