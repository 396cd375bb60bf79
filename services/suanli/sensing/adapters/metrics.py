"""The agent's instruments of the telemetry catalogue (suanli.telemetry.names): snapshots sent, how long a
report slice takes to be acknowledged, tasks running and placements refused."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import metrics

from suanli.sensing.service_layer.host import AgentHost
from suanli.telemetry.names import (
    AGENT_ORDERS_REFUSED,
    AGENT_REPORT_LATENCY,
    AGENT_SNAPSHOTS,
    AGENT_TASKS_RUNNING,
    described,
)

SENT = {"outcome": "sent"}
FAILED = {"outcome": "failed"}


class AgentMetrics:
    """Counts a host's reports as they are acknowledged; tasks and refusals are read from it at scrape."""

    def __init__(self, host: AgentHost, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.sensing")
        self._snapshots = meter.create_counter(AGENT_SNAPSHOTS, **described(AGENT_SNAPSHOTS))
        self._latency = meter.create_histogram(AGENT_REPORT_LATENCY, **described(AGENT_REPORT_LATENCY))

        def running(_: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            return [metrics.Observation(host.tasks_running())]

        def refused(_: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            return [metrics.Observation(host.orders_refused())]

        meter.create_observable_gauge(
            AGENT_TASKS_RUNNING, callbacks=[running], **described(AGENT_TASKS_RUNNING)
        )
        meter.create_observable_counter(
            AGENT_ORDERS_REFUSED, callbacks=[refused], **described(AGENT_ORDERS_REFUSED)
        )

    def reported(self, snapshots: int, seconds: float) -> None:
        """A slice of ``snapshots`` acknowledged ``seconds`` after it was taken."""
        self._snapshots.add(snapshots, SENT)
        self._latency.record(seconds)

    def failed(self, snapshots: int) -> None:
        """A slice of ``snapshots`` that could not be sent (its nodes are tried again at their next turn)."""
        self._snapshots.add(snapshots, FAILED)
