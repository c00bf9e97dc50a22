"""Deprecated alias of :mod:`retinue.store.journal` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.journal import (
    IN_FLIGHT,
    KINDS,
    MAX_EXTRA_CHARS,
    MAX_RECORD_CHARS,
    MAX_SESSION_MESSAGES,
    RECORD_COLUMNS,
    RESUMABLE_STATES,
    STATES,
    SessionJournal,
    SessionRecord,
    decode_messages,
    decode_record,
    decode_records,
    depth_of,
    encode_messages,
    encode_record,
    group_rows,
)

__all__ = [
    "IN_FLIGHT",
    "KINDS",
    "MAX_EXTRA_CHARS",
    "MAX_RECORD_CHARS",
    "MAX_SESSION_MESSAGES",
    "RECORD_COLUMNS",
    "RESUMABLE_STATES",
    "STATES",
    "SessionJournal",
    "SessionRecord",
    "decode_messages",
    "decode_record",
    "decode_records",
    "depth_of",
    "encode_messages",
    "encode_record",
    "group_rows",
]
