"""What `suanli up` shows of its inference service: replicas, scale events, the replay's figures, GPU-seconds.

Pure: folded from the answers of serving's GetService and the scheduler's DescribeJob as `inference.py`
polls them, and from the driver's `DriveSummary`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from suanli.inference.attainment import DriveSummary

SECONDS_PER_HOUR = 3600.0
# Where the GPU-seconds come from (summary.json says so beside the figure).
GPU_SECONDS_SOURCE = (
    "the scheduler's accounting of the service's replica jobs (DescribeJob: each attempt's running time x "
    "its GPUs, as `suanli acct` shows it)"
)


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """The service's desired replica count changed, as seen at `at_s` seconds into the run."""

    at_s: float
    replicas_from: int
    replicas_to: int


@dataclass
class ReplicaTrack:
    """The service's replica counts as polled; every change of the desired count is a scale event."""

    desired: int = 0
    states: Counter[str] = field(default_factory=Counter)  # replica state -> replicas
    peak_running: int = 0
    scale_events: list[ScaleEvent] = field(default_factory=list)
    job_ids: set[str] = field(default_factory=set)  # every replica job seen, replaced ones included
    _seen: bool = False

    def observe(self, at_s: float, desired: int, replicas: Iterable[tuple[str, str]]) -> None:
        """One poll: the desired count and each replica's (state, job id)."""
        if self._seen and desired != self.desired:
            self.scale_events.append(ScaleEvent(round(at_s, 1), self.desired, desired))
        self._seen = True
        self.desired = desired
        self.states = Counter(state for state, _ in replicas)
        self.job_ids.update(job for _, job in replicas if job)
        self.peak_running = max(self.peak_running, self.states["running"])


def gpu_seconds(gpu_hours: Iterable[float]) -> float:
    """The replica jobs' GPU-hours (the scheduler's accounting of each) as GPU-seconds."""
    return round(sum(gpu_hours) * SECONDS_PER_HOUR, 1)


@dataclass
class InferenceStatus:
    """What the dashboard shows of the service now."""

    service: str
    model: str
    desired: int = 0
    states: dict[str, int] = field(default_factory=dict)
    drive: DriveSummary | None = None
    scale_events: int = 0
    last_scale: str = ""
    problem: str = ""


@dataclass
class InferenceSummary:
    """The inference part of `suanli up`'s summary (summary.json's `inference`)."""

    service: str
    model: str
    gateway: str
    speed: float
    requests: int = 0
    answered: int = 0
    slo_met: int = 0
    slo_attainment: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    added_p50_s: float | None = None  # latency seen minus the replica's own (the live path's cost)
    added_p99_s: float | None = None
    requests_per_s: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    gpu_seconds: float | None = None  # None: the scheduler could not be asked
    gpu_seconds_source: str = GPU_SECONDS_SOURCE
    replica_jobs: int = 0
    peak_running: int = 0
    scale_events: list[ScaleEvent] = field(default_factory=list)
    problem: str = ""  # why the service or the replay did not run, when it did not


def summarise(
    base: InferenceSummary, drive: DriveSummary | None, track: ReplicaTrack, gpu: float | None
) -> InferenceSummary:
    """`base` (what was set up) completed with the replay's figures and the replicas'."""
    if drive is not None:
        base.requests, base.answered, base.slo_met = drive.requests, drive.answered, drive.slo_met
        base.slo_attainment = None if drive.slo_attainment is None else round(drive.slo_attainment, 4)
        base.latency_p50_s, base.latency_p99_s = _rounded(drive.latency_p50_s), _rounded(drive.latency_p99_s)
        base.ttft_p50_s, base.ttft_p99_s = _rounded(drive.ttft_p50_s), _rounded(drive.ttft_p99_s)
        base.added_p50_s, base.added_p99_s = _rounded(drive.added_p50_s), _rounded(drive.added_p99_s)
        base.requests_per_s = round(drive.requests_per_s, 2)
        base.failures = dict(drive.failures)
    base.gpu_seconds = gpu
    base.replica_jobs = len(track.job_ids)
    base.peak_running = track.peak_running
    base.scale_events = list(track.scale_events)
    return base


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
