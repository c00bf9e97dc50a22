"""What agents have seen of files is bounded: the least recently touched pair goes first."""

from __future__ import annotations

import pytest

from retinue.tools.builtin import _seen


def test_bounded_least_recently_touched_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_seen, "MAX_KEPT", 3)
    stamp = (1, 2, 3, 4)
    for agent, path in (("bounded-1", "/a"), ("bounded-2", "/a"), ("bounded-1", "/b")):
        _seen.note(agent, path, stamp)
    _seen.note("bounded-1", "/a", stamp)  # touched again: the most recent now
    _seen.note("bounded-3", "/c", stamp)
    assert _seen.last_seen("bounded-2", "/a") is None  # the least recently touched pair
    assert _seen.last_seen("bounded-1", "/a") == stamp
    assert _seen.last_seen("bounded-1", "/b") == stamp
    assert _seen.last_seen("bounded-3", "/c") == stamp
