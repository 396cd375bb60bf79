"""The collector settings the scheduler applies at start: fewer young collections, rebuilt state frozen."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from suanli.infra.gc_tuning import LATENCY_THRESHOLDS, freeze_survivors, tune_for_latency


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_for_latency_raises_the_young_generation_threshold(restored_gc: None) -> None:
    tune_for_latency()
    assert gc.get_threshold() == LATENCY_THRESHOLDS
    assert LATENCY_THRESHOLDS[0] > 700  # CPython's default: the point is to collect young objects less often


def test_frozen_state_is_out_of_the_collectors_reach_and_still_freed_by_refcount(restored_gc: None) -> None:
    class Job:
        pass

    state = [Job() for _ in range(1000)]
    frozen = freeze_survivors()
    assert frozen >= len(state) and gc.get_freeze_count() == frozen
    assert not any(any(o is job for o in gc.get_objects()) for job in state[:3])  # not scanned any more
    kept = weakref.ref(state[0])
    state.clear()  # dropped: reference counting frees them, frozen or not
    assert kept() is None
