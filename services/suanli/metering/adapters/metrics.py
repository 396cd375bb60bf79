"""The metering gauges of the telemetry catalogue, set from a capacity summary."""

from __future__ import annotations

from opentelemetry import metrics

from suanli.metering.domain import Ended, Sampled, Seen, Started, Summary
from suanli.telemetry.names import (
    ALLOCATED_CU,
    CAPACITY_CU,
    METERING_LATE_FACTS,
    NODES,
    PRUNED_ROWS,
    UTILISATION_RATIO,
    described,
)

Labels = tuple[tuple[str, str], ...]


class _Gauge:
    """A gauge that reports 0 for label sets that dropped out, so a panel does not keep a stale value."""

    def __init__(self, meter: metrics.Meter, name: str) -> None:
        self._gauge = meter.create_gauge(name, **described(name))
        self._seen: set[Labels] = set()

    def set_all(self, values: dict[Labels, float]) -> None:
        for labels in self._seen - values.keys():
            self._gauge.set(0, dict(labels))
        for labels, value in values.items():
            self._gauge.set(value, dict(labels))
        self._seen |= values.keys()


class MeteringMetrics:
    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.metering")
        self._capacity = _Gauge(meter, CAPACITY_CU)
        self._allocated = _Gauge(meter, ALLOCATED_CU)
        self._utilisation = _Gauge(meter, UTILISATION_RATIO)
        self._nodes = _Gauge(meter, NODES)

    def observe(self, summary: Summary) -> None:
        by_model = summary.by_region_model
        self._capacity.set_all(
            {(("region", r), ("gpu_model", m)): totals.allocatable for (r, m), totals in by_model.items()}
        )
        self._allocated.set_all(
            {(("region", r), ("gpu_model", m)): totals.used for (r, m), totals in by_model.items()}
        )
        self._utilisation.set_all(
            {(("region", region),): totals.utilisation for region, totals in summary.by_region.items()}
        )
        self._nodes.set_all(
            {
                (("region", region), ("status", status.value.lower())): float(count)
                for (region, status), count in summary.nodes.items()
            }
        )


TASKS_TABLE = "metering_tasks"
# The facts `domain.late` can refuse: the ones with a time.
LATE_FACT_KINDS = tuple(kind.__name__ for kind in (Started, Ended, Sampled, Seen))


class TaskTableCounters:
    """`TaskCounters` as catalogue counters: task records pruned, late facts refused by kind."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.metering")
        self._pruned = meter.create_counter(PRUNED_ROWS, **described(PRUNED_ROWS))
        self._late = meter.create_counter(METERING_LATE_FACTS, **described(METERING_LATE_FACTS))
        # Served at 0 from the start, so a panel or an alert sees the series before the first round.
        self._pruned.add(0, {"table": TASKS_TABLE})
        for kind in LATE_FACT_KINDS:
            self._late.add(0, {"fact": kind})

    def pruned(self, rows: int) -> None:
        self._pruned.add(rows, {"table": TASKS_TABLE})

    def late_fact(self, kind: str) -> None:
        self._late.add(1, {"fact": kind})
