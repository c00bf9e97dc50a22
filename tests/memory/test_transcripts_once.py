"""A transcript kept twice under one id is kept once, the first (a Temporal activity that
keeps it may be tried again: :mod:`retinue.temporal.transcripts`), on both stores."""

from __future__ import annotations

from dataclasses import replace

from memory.test_transcripts import history, summary, transcripts  # noqa: F401  (a fixture)
from retinue.store.transcripts import TranscriptStore, entries_of


async def test_a_second_keep_of_one_id_keeps_the_first(
    transcripts: TranscriptStore,  # noqa: F811  (the fixture)
) -> None:
    first = summary()
    await transcripts.keep("t", first, entries_of(history("herons")))
    again = replace(first, role="other", turns=7)
    await transcripts.keep("t", again, entries_of(history("storks")))
    assert await transcripts.ended("t") == [first]
    found = await transcripts.get("t", first.id)
    assert found is not None and "herons" in found.entries[1]["content"]
    assert [h.summary for h in await transcripts.search("t", "herons")] == [first]
    assert await transcripts.search("t", "storks") == []  # (its text was not indexed either)
