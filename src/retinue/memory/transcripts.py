"""Deprecated alias of :mod:`retinue.store.transcripts` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.transcripts import (
    MAX_ENTRY_CHARS,
    MAX_SEARCH_CHARS,
    SEARCH_TERMS,
    KeepsTranscripts,
    Transcript,
    TranscriptHit,
    TranscriptStore,
    TranscriptSummary,
    children_of,
    entries_json,
    entries_of,
    parse_entries,
    search_terms,
    searchable_text,
    tool_call_count,
    transcript_id,
    transcript_store,
    transcript_text,
    valid_transcript_id,
)

__all__ = [
    "MAX_ENTRY_CHARS",
    "MAX_SEARCH_CHARS",
    "SEARCH_TERMS",
    "KeepsTranscripts",
    "Transcript",
    "TranscriptHit",
    "TranscriptStore",
    "TranscriptSummary",
    "children_of",
    "entries_json",
    "entries_of",
    "parse_entries",
    "search_terms",
    "searchable_text",
    "tool_call_count",
    "transcript_id",
    "transcript_store",
    "transcript_text",
    "valid_transcript_id",
]
