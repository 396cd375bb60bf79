"""The multi-region job stream: openb pods grouped into jobs, and each job's network fields.

Grouping: pods created in the same second with the same request (CPU, memory, GPU count, milli and model
list) are the replicas of one job, placed as a gang (on `default`: 145 jobs of 2-4 pods, 306 of its 8,152
pods); every other pod is a job of its own. A multi-GPU pod stays one task on one node, as in the trace.
Jobs then arrive as pods do in the openb mode (`workload.build_arrivals`: seeded shuffle, resampled up to
`tune` x GPU capacity), one job per arrival.

Network fields, drawn per arrival from their own generator stream (so every policy sees the same jobs):
the data region with the data weights (`geography`), and with probability `bound_share` (default 0.5) a
`max_rtt_ms` bound, 40 ms (the same continent: North America's three regions, Europe's three, Tokyo and
Osaka) or 150 ms (the neighbouring continent) with equal odds. Gangs keep locality `region`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.simulator.geography import draw_regions
from suanli.scheduling.simulator.traces import TracePod

RTT_BOUNDS_MS = (40.0, 150.0)
BOUND_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of the trace: its pods' requests, placed together when there are several."""

    name: str
    tasks: tuple[TaskRequest, ...]

    @property
    def gpu_count(self) -> int:
        return sum(t.gpu_count for t in self.tasks)

    @property
    def gpu_milli(self) -> int:
        # What the inflation's stop test adds for one draw: the per-GPU milli of one pod, as for a pod.
        return self.tasks[0].gpu_milli

    @property
    def total_gpu_milli(self) -> int:
        return sum(t.total_gpu_milli for t in self.tasks)

    @property
    def is_gang(self) -> bool:
        return len(self.tasks) > 1


@dataclass(frozen=True, slots=True)
class NetworkJob:
    """A job with its data region and RTT bound set on every task (`tasks`), and the same job as a
    region-blind scheduler sees it (`blind`: no data region, no bound)."""

    job: TraceJob
    data_region: str
    max_rtt_ms: float | None
    tasks: tuple[TaskRequest, ...]

    @property
    def blind(self) -> tuple[TaskRequest, ...]:
        return self.job.tasks


def group_jobs(pods: Sequence[TracePod]) -> list[TraceJob]:
    """Jobs in the order of their first pod (rule in the module docstring)."""
    groups: dict[object, list[TracePod]] = {}
    for i, pod in enumerate(pods):
        key: object = (pod.creation_time, pod.request) if pod.creation_time is not None else i
        groups.setdefault(key, []).append(pod)
    return [TraceJob(group[0].name, tuple(p.request for p in group)) for group in groups.values()]


def with_network(
    jobs: Sequence[TraceJob],
    data_weights: Mapping[str, float],
    rng: np.random.Generator,
    bound_share: float = BOUND_SHARE,
    bounds: Sequence[float] = RTT_BOUNDS_MS,
) -> list[NetworkJob]:
    if not 0.0 <= bound_share <= 1.0:
        raise ValueError(f"bound_share must be 0..1, got {bound_share}")
    regions = draw_regions(len(jobs), data_weights, rng)
    bounded = rng.random(len(jobs)) < bound_share
    which = rng.integers(len(bounds), size=len(jobs))
    out = []
    for job, region, is_bounded, k in zip(jobs, regions, bounded, which, strict=True):
        bound = float(bounds[int(k)]) if is_bounded else None
        tasks = tuple(replace(t, data_region=region, max_rtt_ms=bound) for t in job.tasks)
        out.append(NetworkJob(job, region, bound, tasks))
    return out
