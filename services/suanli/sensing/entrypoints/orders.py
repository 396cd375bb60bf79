"""The agent's consumer of ``placements``: each order to the host, and one consumer kept running.

Stale orders are skipped and invalid ones raise `InvalidOrder`, which the bus's consumer dead-letters;
a failure the kernel calls transient is retried by the bus first.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from suanli.bus import BrokerWatch, ConsumedEvent, EventConsumer
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


class OrderIntake:
    """Keeps one consumer of ``placements`` running; a consumer that fails is replaced after a pause.

    With a `BrokerWatch`, the broker is looked at every ``check_s``: when it started over (the embedded
    broker restarted empty), the consumer is replaced at once by one that reads the topic from its start
    (``new_consumer(from_start=True)``). The old one may be fetching from its position past the end of
    the recreated topic, or have committed that position into the new broker, and would skip every new
    order, the scheduler's re-sent placements among them.
    """

    def __init__(
        self,
        new_consumer: Callable[[bool], EventConsumer],
        pause_s: float,
        *,
        watch: BrokerWatch | None = None,
        check_s: float = 5.0,
    ) -> None:
        self._new_consumer = new_consumer
        self._pause_s = pause_s
        self._watch = watch
        self._check_s = check_s
        self._consumer: EventConsumer | None = None
        self._running = asyncio.Event()
        self.rebuilds = 0  # consumers replaced because the broker started over

    async def run(self, stop: asyncio.Event) -> None:
        from_start = False  # until a consumer built after a start-over has read from the beginning
        while not stop.is_set():
            consumer = self._new_consumer(from_start)
            self._consumer = consumer
            watching = asyncio.create_task(self._watch_broker(consumer), name="sensing-broker-watch")
            try:
                await consumer.start()
                self._running.set()
                await consumer.run()
            except Exception:
                log.exception("order consumer failed; starting a new one")
            finally:
                self._running.clear()
                watching.cancel()
                with contextlib.suppress(Exception):
                    await consumer.stop()
            from_start = from_start and consumer.rewind_pending
            started_over = False
            with contextlib.suppress(asyncio.CancelledError):
                started_over = await watching
            if started_over:
                from_start = True
                continue  # the new broker's orders are waiting
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._pause_s)

    async def _watch_broker(self, consumer: EventConsumer) -> bool:
        """Ends the consumer's run when the broker started over (True); until then looks every check."""
        if self._watch is None:
            return False
        while True:
            await asyncio.sleep(self._check_s)
            try:
                started_over = await self._watch.look()
            except Exception as exc:  # the broker is away: the consumer's own retries cover it
                log.warning("cannot look at the broker: %r", exc)
                continue
            if started_over:
                log.warning("the broker started over: replacing the order consumer")
                self.rebuilds += 1
                consumer.request_stop()
                return True

    async def stop(self, task: asyncio.Task[None], join_timeout_s: float = 15.0) -> None:
        # A consumer cancelled in the middle of its group join leaves its client open; let the join end.
        if not task.done() and not self._running.is_set():
            joined = asyncio.create_task(self._running.wait())
            await asyncio.wait({task, joined}, timeout=join_timeout_s, return_when=asyncio.FIRST_COMPLETED)
            joined.cancel()
        consumer = self._consumer
        if consumer is not None and self._running.is_set():
            consumer.request_stop()  # let the order in hand finish and its offset be committed
        else:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
