"""Who may be evicted for a pending workload, and the smallest, cheapest set that makes room.

Eligible victims (never a non-preemptible job, always a whole job):
  - best-effort jobs anywhere: they run on idle room and give it back to any guaranteed work;
  - lower-priority jobs of the same queue;
  - jobs of other queues in a shared cohort that are borrowing a flavour the preemptor needs, when the
    preemptor's own level stays within its guarantee (reclaim).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import TypeVar

from suanli.scheduling.domain.queueing.queues import QueueTree
from suanli.scheduling.domain.queueing.quota import Usage, is_borrowing, within_guarantee_after
from suanli.scheduling.domain.queueing.state import RunningWorkload

R = TypeVar("R")
Priority = Callable[[RunningWorkload], int]


def victim_key(workload: RunningWorkload, priority: Priority) -> tuple[int, int, int, str]:
    """Preference order of victims: best-effort first, then lowest priority, then most recent."""
    return (0 if workload.job.best_effort else 1, priority(workload), -workload.workload.seq, workload.job.id)


def victim_pools(
    tree: QueueTree,
    usage: Usage,
    running: Sequence[RunningWorkload],
    queue: str,
    priority_value: int,
    demand: Mapping[str, int],
    priority: Priority,
) -> tuple[tuple[RunningWorkload, ...], ...]:
    """Pools to search in turn: best-effort alone first, so guaranteed work is touched only when
    evicting best-effort work cannot make room; each pool sorted by `victim_key`."""
    lenders = _reclaimable_queues(tree, usage, queue, demand)
    best_effort: list[RunningWorkload] = []
    guaranteed: list[RunningWorkload] = []
    for workload in running:
        job = workload.job
        if not job.preemptible:
            continue
        if job.best_effort:
            best_effort.append(workload)
            continue
        outranked = job.queue == queue and priority(workload) < priority_value
        borrowing = (
            not outranked
            and bool(lenders)
            and job.queue in tree
            and any(level.name in lenders for level in tree.chain(job.queue))
        )
        if outranked or borrowing:
            guaranteed.append(workload)
    pools = []
    if best_effort:
        pools.append(tuple(sorted(best_effort, key=lambda w: victim_key(w, priority))))
    if guaranteed:
        pools.append(tuple(sorted(best_effort + guaranteed, key=lambda w: victim_key(w, priority))))
    return tuple(pools)


def _reclaimable_queues(tree: QueueTree, usage: Usage, queue: str, demand: Mapping[str, int]) -> set[str]:
    out: set[str] = set()
    for level in tree.chain(queue):
        if level.cohort is None or not within_guarantee_after(usage, level, demand):
            continue
        for member in tree.cohort_members(level.cohort):
            if member.name != level.name and any(is_borrowing(usage, member, r) for r in demand):
                out.add(member.name)
    return out


def minimal_victims(
    pool: Sequence[RunningWorkload],
    feasible: Callable[[tuple[RunningWorkload, ...]], R | None],
    budget: int,
) -> tuple[tuple[RunningWorkload, ...], R] | None:
    """Fewest victims, then the most preferred ones (the pool is in preference order).

    A greedy prefix proves some set works; pruning it gives a small fallback; then sets are tried by size
    and in lexicographic (preference) order, so the first that works is the answer. The exhaustive part
    is bounded by `budget` placement attempts, after which the pruned greedy set stands.
    """
    chosen: list[RunningWorkload] = []
    outcome: R | None = None
    for candidate in pool:
        chosen.append(candidate)
        outcome = feasible(tuple(chosen))
        if outcome is not None:
            break
    if outcome is None:
        return None
    for candidate in reversed(chosen[:]):
        trial = tuple(c for c in chosen if c is not candidate)
        if trial and (pruned := feasible(trial)) is not None:
            chosen, outcome = list(trial), pruned
    for size in range(1, len(chosen) + 1):
        for combo in combinations(pool, size):
            if budget <= 0:
                return tuple(chosen), outcome
            budget -= 1
            if (found := feasible(combo)) is not None:
                return combo, found
    return tuple(chosen), outcome
