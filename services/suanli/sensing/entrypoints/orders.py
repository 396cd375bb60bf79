"""The agent's handler of ``placements``: each order to the host (`suanli.bus.KeptConsumer` keeps the
consumer running).

Stale orders are skipped and invalid ones raise `InvalidOrder`, which the bus's consumer dead-letters;
a failure the kernel calls transient is retried by the bus first.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from suanli.bus import ConsumedEvent
from suanli.clock import Clock
from suanli.sensing.service_layer.host import AgentHost
from suanli.telemetry.tracing import tracer

log = logging.getLogger(__name__)

# Span names of the orders, in the domain's words; any other order is ``sensing.order``.
_SPANS = {"TaskPlaced": "start_task", "TaskPreempted": "stop_task", "TaskStopRequested": "stop_task"}


class OrderHandler:
    """Handles one record of ``placements``: stale orders are skipped, invalid ones raise (dead-letter)."""

    def __init__(self, host: AgentHost, *, clock: Clock, max_age_s: float | None = None) -> None:
        self._host = host
        self._clock = clock
        self._max_age_s = max_age_s

    async def __call__(self, event: ConsumedEvent) -> None:
        if event.tombstone:
            return
        if self._stale(event.record.get("occurred_at")):
            # The scheduler reconciles against our snapshots, so an order it gave up on is safe to skip.
            log.info("skipping stale %s for %s", event.event_name, event.record.get("task_id"))
            return
        # Inside the consumer span, which continues the scheduler's trace: what the host publishes
        # (TaskStarted) is sent in this span's context.
        attributes: dict[str, str] = {
            k: str(event.record[k]) for k in ("job_id", "task_id", "node_id") if k in event.record
        }
        with tracer("suanli.sensing").start_as_current_span(
            f"sensing.{_SPANS.get(event.event_name, 'order')}"
        ) as span:
            span.set_attributes({**attributes, "event_name": event.event_name})
            await self._host.handle_order(event.event_name, event.record, event.key_str)

    def _stale(self, occurred_at: Any) -> bool:
        if self._max_age_s is None or not isinstance(occurred_at, dt.datetime):
            return False
        return (self._clock.now() - occurred_at).total_seconds() > self._max_age_s
