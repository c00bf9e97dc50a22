"""What agents have seen of files is bounded: the least recent agent and file go first."""

from __future__ import annotations

import pytest

from retinue.tools.builtin import _seen


def test_bounded_per_agent_and_in_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_seen, "MAX_FILES", 2)
    monkeypatch.setattr(_seen, "MAX_AGENTS", 2)
    stamp = (1, 2, 3, 4)
    for path in ("/a", "/b", "/c"):
        _seen.note("bounded-1", path, stamp)
    assert _seen.last_seen("bounded-1", "/a") is None  # the least recently touched file
    assert _seen.last_seen("bounded-1", "/c") == stamp
    _seen.note("bounded-2", "/x", stamp)
    _seen.note("bounded-1", "/b", stamp)  # bounded-1 is the most recent agent again
    _seen.note("bounded-3", "/y", stamp)
    assert _seen.last_seen("bounded-2", "/x") is None  # the least recently active agent
    assert _seen.last_seen("bounded-1", "/b") == stamp
    assert _seen.last_seen("bounded-3", "/y") == stamp
