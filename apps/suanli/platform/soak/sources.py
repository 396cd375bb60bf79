"""Readers of what the soak observes: `suanli up`'s headless output, /proc status and stat, /metrics text.

Each takes text and returns figures, so the bench's loop is only I/O and these are tested on fixed text.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from suanli.telemetry.names import CONSUMER_LAG, OUTBOX_PENDING, PLACEMENT_LATENCY, SCHEDULER_CYCLE

# `suanli up --headless` progress (suanli.platform.dashboard.status_line): elapsed, phase and job counts.
_PROGRESS = re.compile(
    r"^\s*\d+s\s+(?P<phase>\w+)\s+submitted (?P<submitted>\d+)/\d+"
    r"\s+pending (?P<pending>\d+)\s+running (?P<running>\d+)"
    r"\s+succeeded (?P<succeeded>\d+)\s+failed (?P<failed>\d+)\s+cancelled (?P<cancelled>\d+)"
)
# The start-up line `suanli up` prints: "/metrics on 127.0.0.1: billing :PORT, fleet :PORT, ...".
_METRICS_LINE = re.compile(r"^/metrics on (?P<host>[\w.:\[\]-]+): (?P<ports>.+)$")
_PORT = re.compile(r"(?P<name>[\w-]+) :(?P<port>\d+)")


@dataclass(frozen=True, slots=True)
class Progress:
    """One progress line: the run's phase (submitting, draining, settling) and its jobs by state."""

    phase: str
    submitted: int
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int

    @property
    def final(self) -> int:
        return self.succeeded + self.failed + self.cancelled


def parse_progress(line: str) -> Progress | None:
    """The progress in ``line``, or None when it is some other line."""
    match = _PROGRESS.match(line)
    if match is None:
        return None
    counts = {k: int(v) for k, v in match.groupdict().items() if k != "phase"}
    return Progress(phase=match["phase"], **counts)


def parse_metrics_ports(line: str) -> dict[str, str] | None:
    """Each process's /metrics URL from `suanli up`'s start-up line, or None for another line."""
    match = _METRICS_LINE.match(line.strip())
    if match is None:
        return None
    host = match["host"]
    return {m["name"]: f"http://{host}:{m['port']}/metrics" for m in _PORT.finditer(match["ports"])}


def vm_rss_mib(status: str) -> float | None:
    """Resident memory from the text of /proc/PID/status (VmRSS, in kB), in MiB; None when absent."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def cpu_seconds(stat: str, ticks_per_s: int) -> float:
    """User + system CPU time from the text of /proc/PID/stat (fields 14 and 15, in clock ticks)."""
    fields = stat.rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


# A histogram's cumulative bucket counts by upper bound (math.inf last), summed over its label sets.
Buckets = dict[float, float]


@dataclass
class Scrape:
    """The figures the soak keeps from one /metrics page."""

    lag: dict[str, float] = field(default_factory=dict)  # consumer group -> records behind, all topics
    outbox: float | None = None  # unpublished outbox rows the relay last read (None: no relay here)
    histograms: dict[str, Buckets] = field(default_factory=dict)  # metric name -> buckets


# Histograms whose interval quantiles the soak reports: submit -> placement, and one scheduling cycle.
HISTOGRAMS = (PLACEMENT_LATENCY, SCHEDULER_CYCLE)


def parse_scrape(text: str) -> Scrape:
    """Consumer lag per group, outbox depth and the soak's histograms from a Prometheus text page."""
    scrape = Scrape()
    lag: dict[str, float] = defaultdict(float)
    histograms: dict[str, Buckets] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == CONSUMER_LAG:
                lag[sample.labels.get("group", "")] += sample.value
            elif sample.name == OUTBOX_PENDING:
                scrape.outbox = sample.value
            elif sample.name.endswith("_bucket") and sample.name.removesuffix("_bucket") in HISTOGRAMS:
                bound = float(sample.labels["le"])
                histograms[sample.name.removesuffix("_bucket")][bound] += sample.value
    scrape.lag = dict(lag)
    scrape.histograms = {name: dict(buckets) for name, buckets in histograms.items()}
    return scrape


def interval(now: Mapping[float, float], before: Mapping[float, float] | None) -> Buckets:
    """The observations between two scrapes of one histogram. A counter that went down (the process
    restarted) counts from zero."""
    if before is None:
        return dict(now)
    delta = {bound: count - before.get(bound, 0.0) for bound, count in now.items()}
    if any(d < 0 for d in delta.values()):
        return dict(now)
    return delta


def quantile(buckets: Mapping[float, float], q: float) -> float | None:
    """The q-quantile (0..1) of cumulative buckets, interpolated inside its bucket as Prometheus's
    histogram_quantile does; the highest finite bound when it falls in +Inf; None without observations."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, count
    return lower
