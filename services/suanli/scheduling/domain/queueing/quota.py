"""Quota arithmetic over a usage table: headroom along the queue chain, cohort lending, DRF shares.

`usage` maps every queue (leaf and ancestor alike) to what its subtree holds of guaranteed work; best-effort
work is never in it.

Cohort accounting (kueue's model): a member lends `lendable` of each guaranteed flavour to the cohort's
pool and keeps the rest. The pool's capacity is the sum of the members' lendable amounts; a member draws
on the pool for whatever it uses beyond its kept part.
"""

from __future__ import annotations

from collections.abc import Mapping

from suanli.scheduling.domain.queueing.queues import QueueSpec, QueueTree
from suanli.scheduling.domain.queueing.reasons import QuotaExceeded
from suanli.scheduling.domain.queueing.resources import flavour_order

Usage = Mapping[str, Mapping[str, int]]


def _used(usage: Usage, queue: str, resource: str) -> int:
    return usage.get(queue, {}).get(resource, 0)


def cohort_capacity(tree: QueueTree, cohort: str, resource: str) -> int:
    return sum(q.lendable for m in tree.cohort_members(cohort) if (q := m.quota(resource)) is not None)


def cohort_guaranteed(tree: QueueTree, cohort: str, resource: str) -> int:
    return sum(q.guaranteed for m in tree.cohort_members(cohort) if (q := m.quota(resource)) is not None)


def cohort_used(tree: QueueTree, usage: Usage, cohort: str, resource: str) -> int:
    total = 0
    for member in tree.cohort_members(cohort):
        quota = member.quota(resource)
        kept = quota.kept if quota is not None else 0
        total += max(0, _used(usage, member.name, resource) - kept)
    return total


def headroom(tree: QueueTree, usage: Usage, level: QueueSpec, resource: str) -> int | None:
    """How much more of `resource` this one level admits; None when the level does not govern it."""
    quota = level.quota(resource)
    if quota is None:
        return None
    used = _used(usage, level.name, resource)
    ceiling: int | None
    if level.cohort is None:
        ceiling = quota.guaranteed
    else:
        ceiling = quota.guaranteed + quota.borrowing_limit if quota.borrowing_limit is not None else None
    if quota.maximum is not None:
        ceiling = quota.maximum if ceiling is None else min(ceiling, quota.maximum)
    room = None if ceiling is None else ceiling - used
    if level.cohort is not None:
        pool = cohort_capacity(tree, level.cohort, resource) - cohort_used(
            tree, usage, level.cohort, resource
        )
        from_cohort = max(0, quota.kept - used) + max(0, pool)
        room = from_cohort if room is None else min(room, from_cohort)
    assert room is not None  # without a cohort the guarantee is a ceiling; with one, the cohort bounds it
    return max(0, room)


def check_quota(tree: QueueTree, usage: Usage, queue: str, demand: Mapping[str, int]) -> QuotaExceeded | None:
    """The first binding shortfall (GPU flavours first, then leaf to root), or None when it all fits."""
    for resource in sorted(demand, key=flavour_order):
        for level in tree.chain(queue):
            room = headroom(tree, usage, level, resource)
            if room is not None and demand[resource] > room:
                return QuotaExceeded(level.name, resource, demand[resource], room)
    return None


def is_borrowing(usage: Usage, level: QueueSpec, resource: str) -> bool:
    quota = level.quota(resource)
    return quota is not None and _used(usage, level.name, resource) > quota.guaranteed


def within_guarantee_after(usage: Usage, level: QueueSpec, demand: Mapping[str, int]) -> bool:
    """True when adding `demand` keeps the level inside its guarantee for every flavour it governs."""
    return all(
        _used(usage, level.name, resource) + amount <= quota.guaranteed
        for resource, amount in demand.items()
        if (quota := level.quota(resource)) is not None
    )


def dominant_share(tree: QueueTree, usage: Usage, level: QueueSpec) -> float:
    """max over flavours of used / guaranteed; a flavour with no guarantee is measured against the
    cohort's total guarantee (it can only be borrowed), and one with neither does not count."""
    share = 0.0
    for resource, used in usage.get(level.name, {}).items():
        quota = level.quota(resource)
        basis = quota.guaranteed if quota is not None else 0
        if basis == 0 and level.cohort is not None:
            basis = cohort_guaranteed(tree, level.cohort, resource)
        if basis > 0:
            share = max(share, used / basis)
    return share


def fair_share_key(tree: QueueTree, usage: Usage, queue: str) -> tuple[tuple[float, str], ...]:
    """Hierarchical DRF: compare tenants' shares first, then teams' within a tenant (root first)."""
    return tuple((dominant_share(tree, usage, level), level.name) for level in reversed(tree.chain(queue)))
