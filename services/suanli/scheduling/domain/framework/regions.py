"""Region choice for a whole job before node choice.

A gang that must stay together (locality `region` or `zone`), or a single task with a data region, is
placed in one region: candidate regions are ranked by a weighted sum of capacity (free GPU, or CPU for
CPU work, relative to the roomiest region), network (RTT to the data region, 1 at 0 ms down to 0 at
`rtt_scale_ms`) and price (cheapest rate per CU-hour for the job's devices, relative to the cheapest
region), each 0..1; the weights come from the profile (`region_choice`). Regions the job's allow-list or
network constraint rules out, or whose free room is short of the gang's total, are not tried. Ties go to
the region name, so the order never consumes the scheduler's random generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext, ProfileError
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.network import LinkStatus, region_exclusions
from suanli.scheduling.domain.snapshot import ClusterSnapshot

_WEIGHT_KEYS = ("capacity", "network", "price")


@dataclass(frozen=True, slots=True)
class RegionWeights:
    capacity: float = 1.0
    network: float = 1.0
    price: float = 0.5
    rtt_scale_ms: float = 300.0

    @classmethod
    def from_dict(cls, data: Any, profile: str) -> RegionWeights:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ProfileError(f"profile {profile!r}: region_choice must be a mapping")
        allowed = (*_WEIGHT_KEYS, "rtt_scale_ms")
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ProfileError(
                f"profile {profile!r}: unknown region_choice key(s) {unknown}; allowed: {allowed}"
            )
        values: dict[str, float] = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ProfileError(
                    f"profile {profile!r}: region_choice.{key} must be a number >= 0, got {value!r}"
                )
            values[key] = float(value)
        if values.get("rtt_scale_ms", 1.0) <= 0:
            raise ProfileError(f"profile {profile!r}: region_choice.rtt_scale_ms must be > 0")
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RegionCandidate:
    """One region as region choice saw it; `excluded` says why it was not tried (None: it was ranked)."""

    code: int
    region: str
    excluded: str | None = None
    rtt_ms: float | None = None
    cu_hour: float | None = None
    capacity: float = 0.0
    network: float = 0.0
    price: float = 0.0
    score: float = 0.0
    network_excluded: bool = False


def _allowed_by_list(requests: Sequence[TaskRequest], region: str) -> bool:
    return all(not r.regions or region in r.regions for r in requests)


def _cu_hour(
    snapshot: ClusterSnapshot, ctx: PluginContext, requests: Sequence[TaskRequest], code: int
) -> float | None:
    """The cheapest rate for the job's devices in the region: over the GPU models its nodes have (and
    the job allows) for GPU work, CPU's rate otherwise."""
    region = snapshot.regions[code]
    gpu = [r for r in requests if r.gpu_count]
    if not gpu:
        return ctx.prices.model_cu_hour(None, region)
    allowed = set(gpu[0].gpu_models)
    present = np.unique(snapshot.model_code[(snapshot.region_code == code) & (snapshot.model_code >= 0)])
    rates = [
        rate
        for m in present
        if not allowed or snapshot.models[int(m)] in allowed
        if (rate := ctx.prices.model_cu_hour(snapshot.models[int(m)], region)) is not None
    ]
    return min(rates) if rates else None


def _shortfall(snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], rows: np.ndarray) -> str | None:
    """A necessary condition only: the region's free room summed must cover the gang's total."""
    needs = (
        ("GPU milli", sum(r.total_gpu_milli for r in requests), int(snapshot.gpu_free[rows].sum())),
        ("milli-CPU", sum(r.cpu_milli for r in requests), int(snapshot.cpu_free[rows].sum())),
        ("MiB memory", sum(r.memory_mib for r in requests), int(snapshot.mem_free[rows].sum())),
    )
    for what, wanted, free in needs:
        if wanted > free:
            return f"free room short: the gang needs {wanted} {what}, the region has {free} free"
    return None


def rank_regions(
    snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], ctx: PluginContext, weights: RegionWeights
) -> list[RegionCandidate]:
    """Every region of the snapshot: those worth trying first, best first, then the excluded ones."""
    first = requests[0]
    names = snapshot.regions
    network = region_exclusions(ctx.network, first, names)
    paths = ctx.network.paths_to(first.data_region, names) if first.data_region else None
    gpu_work = any(r.gpu_count for r in requests)
    ranked: list[RegionCandidate] = []
    excluded: list[RegionCandidate] = []
    for code, region in enumerate(names):
        rows = np.flatnonzero(snapshot.region_code == code)
        rtt = None if paths is None or np.isnan(paths.rtt_ms[code]) else float(paths.rtt_ms[code])
        why: str | None = None
        if not _allowed_by_list(requests, region):
            why = "not in the job's regions allow-list"
        elif network[code] is not None:
            excluded.append(RegionCandidate(code, region, network[code], rtt, network_excluded=True))
            continue
        else:
            why = _shortfall(snapshot, requests, rows)
        if why is not None:
            excluded.append(RegionCandidate(code, region, why, rtt))
            continue
        free = snapshot.gpu_free[rows].sum() if gpu_work else snapshot.cpu_free[rows].sum()
        net = 0.0
        if paths is not None and rtt is not None:
            net = max(0.0, 1.0 - rtt / weights.rtt_scale_ms)
            if paths.status[code] == LinkStatus.DEGRADED:
                net *= 0.5
        ranked.append(
            RegionCandidate(
                code, region, None, rtt, _cu_hour(snapshot, ctx, requests, code), float(free), net
            )
        )
    most_free = max((c.capacity for c in ranked), default=0.0) or 1.0
    prices = [c.cu_hour for c in ranked if c.cu_hour]
    cheapest = min(prices) if prices else None
    scored = []
    for c in ranked:
        capacity = c.capacity / most_free
        price = cheapest / c.cu_hour if cheapest and c.cu_hour else 0.0
        total = weights.capacity * capacity + weights.network * c.network + weights.price * price
        scored.append(
            RegionCandidate(c.code, c.region, None, c.rtt_ms, c.cu_hour, capacity, c.network, price, total)
        )
    scored.sort(key=lambda c: (-c.score, c.region))
    return scored + excluded


def domain_order(
    snapshot: ClusterSnapshot, codes: np.ndarray, within: np.ndarray, gpu_work: bool
) -> list[int]:
    """The domains (zones, fabric domains: `codes` per node, -1 for none) of the nodes in `within`,
    roomiest first (free GPU for GPU work, else free CPU), then by code."""
    present = np.unique(codes[within & (codes >= 0)])
    free = snapshot.gpu_free.sum(axis=1) if gpu_work else snapshot.cpu_free
    room = {int(d): float(free[codes == d].sum()) for d in present}
    return sorted(room, key=lambda d: (-room[d], d))


def linked_regions(
    ctx: PluginContext, snapshot: ClusterSnapshot, used: set[int], min_gbps: float
) -> np.ndarray:
    """Per region of the snapshot: True where every link to the regions in `used` has at least
    `min_gbps` measured (a region is always linked to itself)."""
    ok = np.ones(len(snapshot.regions), dtype=bool)
    for u in used:
        paths = ctx.network.paths_to(snapshot.regions[u], snapshot.regions)
        linked = (np.nan_to_num(paths.bandwidth_mbps, nan=-1.0) >= min_gbps * 1000.0) & ~paths.down
        linked[u] = True
        ok &= linked
    return ok
