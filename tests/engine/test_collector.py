"""``retinue serve``'s collector settings: the young threshold raised, never lowered."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from retinue.engine.collector import YOUNG_THRESHOLD, tune_for_serving


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_raises_the_young_threshold_and_keeps_the_older_ones() -> None:
    gc.set_threshold(700, 10, 10)
    assert tune_for_serving() == (700, 10, 10)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)


def test_never_lowers_a_higher_setting() -> None:
    gc.set_threshold(YOUNG_THRESHOLD * 3, 5, 7)
    tune_for_serving()
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 3, 5, 7)
