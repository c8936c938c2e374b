"""``settle_heap``: what start-up made is taken out of the cycle collector's way once the
process is ready, and no garbage is kept with it; the youngest objects are collected less
often."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bot.app import YOUNG_OBJECTS, settle_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()  # (the other tests run with the collector as it was)
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("unfrozen")
def test_settling_freezes_what_lives_and_frees_the_garbage_first() -> None:
    live = _Node()
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    settle_heap()
    assert gone() is None  # collected before the freeze, not kept for good
    assert gc.get_freeze_count() > 0
    assert live not in gc.get_objects()  # frozen: no collection walks it any more


@pytest.mark.usefixtures("unfrozen")
def test_settling_collects_the_young_less_often_and_the_older_as_before() -> None:
    gc.set_threshold(700, 10, 10)
    settle_heap()
    assert gc.get_threshold() == (YOUNG_OBJECTS, 10, 10)
