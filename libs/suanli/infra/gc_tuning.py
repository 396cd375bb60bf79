"""Garbage-collector settings for the latency-sensitive services.

CPython's full (generation 2) collection walks every tracked object, and nothing else in the process runs
meanwhile. The scheduler keeps its whole projection in memory (every job, its tasks and their records), so
under the platform bench a full collection took 86 ms at the median and up to 250 ms on the contended
2-core machine, and with the default thresholds (700, 10, 10) one came every ~5 s: the largest source of
submit -> placement tail latency once lock waits were gone (timed with a temporary `gc.callbacks` hook;
docs/BENCHMARKS.md says how).

Two standard remedies for long-lived services:
- `freeze_survivors()` once the state is rebuilt: everything alive then moves to the permanent generation
  and is never scanned again. Frozen objects are still freed when their reference count drops; only a
  reference cycle among them would stay, and the rebuilt state holds none that later dies.
- `tune_for_latency()`: a larger generation-0 threshold, so young collections, and with them the full
  collections they trigger, run an order of magnitude less often. Young objects still die by reference
  counting as before; only cyclic garbage waits longer.
"""

from __future__ import annotations

import gc

# Generation 0 at 20k net allocations (default 700); generations 1 and 2 as CPython's defaults.
LATENCY_THRESHOLDS = (20_000, 10, 10)


def tune_for_latency(thresholds: tuple[int, int, int] = LATENCY_THRESHOLDS) -> None:
    """Raise the generation-0 threshold, so collections (and the full ones they trigger) run less often."""
    gc.set_threshold(*thresholds)


def freeze_survivors() -> int:
    """Collect once, then move every surviving object to the permanent generation; return how many."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
