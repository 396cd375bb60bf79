"""Workload construction of the FGD paper (METHOD.md section 2): the typical-task distribution of the
original pod list, a seeded shuffle, and inflation (or deflation) to `tune` x the cluster's GPU capacity.

The shuffle and the resampling use numpy's generator, not Go's math/rand, so runs match the paper's in
distribution, not seed for seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from suanli.scheduling.domain.fragmentation import TypicalTask, typical_tasks
from suanli.scheduling.domain.model import TaskRequest

TYPICAL_COVERAGE = 0.95


class Arrival(Protocol):
    """What the inflation needs of an arriving unit: a pod (`TaskRequest`) or a whole job of pods."""

    @property
    def gpu_count(self) -> int: ...

    @property
    def gpu_milli(self) -> int: ...

    @property
    def total_gpu_milli(self) -> int: ...


A = TypeVar("A", bound=Arrival)


def workload_distribution(requests: Sequence[TaskRequest]) -> tuple[TypicalTask, ...]:
    return typical_tasks(requests, TYPICAL_COVERAGE)


def build_arrivals(
    requests: Sequence[A], capacity_gpu_milli: int, tune: float, rng: np.random.Generator
) -> list[A]:
    """Arrival order: the shuffled originals, then uniform resamples (with replacement) appended until the
    next draw would pass `tune` x capacity; or, when the originals already exceed it, random removals until
    they do not. As in the paper's simulator the stop test adds the drawn pod's per-GPU milli, so CPU-only
    draws never stop the inflation. The units may be pods or jobs (the multi-region mode arrives by job)."""
    if tune <= 0:
        raise ValueError("tune must be positive")
    target = tune * capacity_gpu_milli
    order = [requests[i] for i in rng.permutation(len(requests))]
    total = sum(r.total_gpu_milli for r in order)
    if total > target:
        while total > target and order:
            victim = order.pop(int(rng.integers(len(order))))
            total -= victim.total_gpu_milli
        return order
    if not any(r.gpu_count for r in requests):
        return order
    while True:
        draw = requests[int(rng.integers(len(requests)))]
        if total + draw.gpu_milli > target:
            return order
        order.append(draw)
        total += draw.total_gpu_milli
