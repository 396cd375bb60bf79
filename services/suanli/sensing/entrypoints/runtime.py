"""Run an `AgentHost` against the bus until asked to stop: register, report each node once per interval
(a fleet spread over the interval), probe links, act on orders from ``placements``. A failed report is
logged and retried at the node's next turn; it never ends the agent (ARCHITECTURE §2.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from suanli.bus import ConsumerSettings, KeptConsumer
from suanli.bus.kept import DEFAULT_CHECK_S
from suanli.clock import Clock
from suanli.sensing.adapters.metrics import AgentMetrics
from suanli.sensing.bootstrap import SYSTEM_CLOCK, AgentBus
from suanli.sensing.entrypoints.orders import OrderHandler
from suanli.sensing.service_layer.host import AgentHost, Taken
from suanli.sensing.service_layer.ports import EventSink
from suanli.sensing.service_layer.schedule import DEFAULT_MIN_GAP_S, ReportSchedule

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How `serve` runs a host (the operator's settings come from entrypoints.settings)."""

    bootstrap: str
    group_id: str
    prefix: str | None
    interval_s: float
    probe_interval_s: float
    # Nodes of a fleet report spread over the interval; reports due closer together than this go together.
    min_report_gap_s: float = DEFAULT_MIN_GAP_S
    # Orders older than this when first read are skipped (a new consumer group starts at the earliest).
    max_order_age_s: float | None = 600.0
    stop_tasks_on_exit: bool = True
    # No snapshot acknowledged for this long: stop every task (0: never); see `report_loop`.
    self_fence_s: float = 0.0
    client_id: str = "suanli-sensing"
    consumer: ConsumerSettings | None = None
    # Seconds between looks at the broker; one that started over gets a new order consumer.
    topic_check_s: float = DEFAULT_CHECK_S


async def serve(
    settings: RunSettings,
    build: Callable[[EventSink], AgentHost],
    stop: asyncio.Event,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> AgentHost:
    """Start the publisher, build the host on it, consume orders and report until ``stop`` is set.

    Reporting starts at once; the consumer joins its group alongside (a join takes seconds) and reads
    from its committed offset, so no order placed meanwhile is missed.
    """
    bus = AgentBus(
        settings.bootstrap, settings.prefix, client_id=settings.client_id, consumer=settings.consumer
    )
    sink = await bus.start()
    try:
        host = build(sink)
        handler = OrderHandler(host, clock=clock, max_age_s=settings.max_order_age_s)
        intake = KeptConsumer(
            lambda from_start: bus.order_consumer(settings.group_id, handler, from_start=from_start),
            pause_s=settings.interval_s,
            watch=bus.watch,
            check_s=settings.topic_check_s,
            name="order consumer",
        )
        consuming = asyncio.create_task(intake.run(stop), name="sensing-orders")
        try:
            await report_loop(host, settings, stop, metrics=AgentMetrics(host))
        finally:
            await intake.stop(consuming)
        # Orders have stopped coming in; now end the tasks and publish how they ended.
        await host.shutdown(stop_tasks=settings.stop_tasks_on_exit)
        return host
    finally:
        await bus.stop()


# Intervals' worth of slice reports whose acknowledgements may be outstanding: longer than metering's
# timeout (3 intervals), so acknowledgements alone never make a node report late.
IN_FLIGHT_INTERVALS = 5

# Seconds on a clock that never jumps (the event loop's): it paces reports; event times use the Clock.
Monotonic = Callable[[], float]
Pause = Callable[[asyncio.Event, float], Awaitable[None]]


async def pause_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def report_loop(
    host: AgentHost,
    settings: RunSettings,
    stop: asyncio.Event,
    *,
    monotonic: Monotonic | None = None,
    pause: Pause = pause_unless_stopped,
    metrics: AgentMetrics | None = None,
) -> None:
    """Report each node once per interval on its own phase (`ReportSchedule`), probe links, until stopped.

    A loop that falls behind reports the next slice at once and keeps going: no catch-up burst. A slice
    that fails (the broker is away) is retried at its next turn, one interval later, while the other
    slices keep their turns: every node is tried once per interval, as when the fleet reported at once.

    A slice's snapshots are taken on its turn and their acknowledgements awaited in the background (at
    most `IN_FLIGHT_INTERVALS` intervals' worth of slices in flight): a broker slow to acknowledge, under a
    burst of other traffic, must not hold back the next slices' snapshots, or a live node reports late and
    looks lost. Each record carries its send time as its timestamp, which is what metering judges by.

    Self-fencing: when no snapshot was acknowledged for ``self_fence_s`` (the broker unreachable, or this
    process paused: the monotonic clock counts the pause), the platform has taken these nodes for lost
    and may have started their tasks' next attempts elsewhere, so every task is stopped (reported KILLED
    once the broker answers) before anything else is reported. The scheduler waits at least this long
    for a lost attempt's end (`SUANLI_SCHEDULING_LOST_FENCE_S`), so two attempts never run side by side.
    """
    now = monotonic or asyncio.get_running_loop().time
    schedule = ReportSchedule(list(host.agents), settings.interval_s, min_gap_s=settings.min_report_gap_s)
    registered = False
    next_probe = deadline = now()
    register_tick = 0
    failures = 0
    tick = 0
    in_flight: deque[asyncio.Task[None]] = deque()
    probing: asyncio.Task[int] | None = None
    contact = Contact(now())

    def reaped(task: asyncio.Task[None]) -> None:
        nonlocal failures
        task.result()  # raises what the slice's report raised
        if failures:
            log.info("reporting again after %d failed attempt(s)", failures)
            failures = 0

    while not stop.is_set():
        contact.fence_if_silent(host, now(), settings.self_fence_s)
        try:
            if not registered and tick >= register_tick:
                register_tick = tick + len(schedule.slices)  # if it fails: again one interval later
                await host.register_all()
                registered = True
                log.info(
                    "registered %d node(s), reporting in %d slice(s)", len(host.agents), len(schedule.slices)
                )
            if registered:
                taken = host.take_snapshots(schedule.slice(tick))  # stamped on the slice's turn
                in_flight.append(
                    asyncio.create_task(_publish(host, taken, metrics, now, contact), name=f"report-{tick}")
                )
                # Earlier slices' acknowledgements: the finished ones, and the oldest while more than
                # the bound are in flight (a broker that takes that long holds the loop back).
                bound = IN_FLIGHT_INTERVALS * len(schedule.slices)
                while in_flight and (in_flight[0].done() or len(in_flight) > bound):
                    oldest = in_flight.popleft()
                    await asyncio.wait({oldest})
                    reaped(oldest)
                if now() >= next_probe and (probing is None or probing.done()):
                    next_probe = now() + settings.probe_interval_s
                    if probing is not None:
                        probing.result()  # the last round's failure, if any, counts here
                    # In the background too: a round awaits its acknowledgements like a slice does.
                    probing = asyncio.create_task(host.probe_links(), name="probe-links")
        except Exception:
            # While the broker is away every slice fails: one traceback per outage, not one per slice.
            if not failures:
                log.exception("report failed; each node is retried at its next turn")
            failures += 1
        tick += 1
        deadline = max(deadline + schedule.tick_s, now())
        await pause(stop, deadline - now())
    for task in [*in_flight, *([probing] if probing is not None else [])]:
        with contextlib.suppress(Exception):  # the last acknowledgements: failures are the next run's
            await task


@dataclass(slots=True)
class Contact:
    """When the broker last acknowledged a snapshot of this host, and whether it fenced itself since."""

    acknowledged_at: float  # monotonic seconds
    fenced: bool = False

    def acknowledged(self, at: float) -> None:
        self.acknowledged_at = max(self.acknowledged_at, at)
        self.fenced = False

    def fence_if_silent(self, host: AgentHost, now: float, self_fence_s: float) -> None:
        """Stop every task once no snapshot was acknowledged for ``self_fence_s`` (0: never)."""
        silent = now - self.acknowledged_at
        if self_fence_s <= 0 or self.fenced or silent < self_fence_s:
            return
        self.fenced = True
        stopped = host.fence(f"self-fenced: no snapshot acknowledged for {silent:.1f} s")
        log.warning(
            "no snapshot acknowledged for %.1f s (self-fence after %.1f s): stopped %d task(s)",
            silent,
            self_fence_s,
            stopped,
        )


async def _publish(
    host: AgentHost, taken: list[Taken], metrics: AgentMetrics | None, now: Monotonic, contact: Contact
) -> None:
    """Publish a slice's reports; with metrics, count its snapshots and time their acknowledgement."""
    started = now()
    try:
        await host.publish_reports(taken)
    except Exception:
        if metrics is not None:
            metrics.failed(len(taken))
        raise
    contact.acknowledged(now())
    if metrics is not None:
        metrics.reported(len(taken), now() - started)
