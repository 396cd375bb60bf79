"""The running scheduling service: gRPC server, capacity view, leader election and, while leader, the
lifecycle consumer, the command topic's consumer (docs/commands.md), the scheduling loop, queue
configuration and the projection's snapshots; the outbox relay everywhere (its own
lease picks one publisher). `SchedulingApp.start()/stop()`; `serve()` runs until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

from suanli.auth.server import server_auth
from suanli.bus import ConsumedEvent, ConsumerSettings, EventPublisher, RetriableError
from suanli.bus import topics as bus_topics
from suanli.clock import SystemClock
from suanli.eventstore import ConcurrencyConflict, OutboxRelay, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import RELAY_PRODUCER, KafkaOutboxSink
from suanli.eventstore.relay import OutboxMetrics
from suanli.infra.gc_tuning import freeze_survivors, tune_for_latency
from suanli.infra.transient import is_transient
from suanli.scheduling.adapters.agent_logs import AgentLogClient
from suanli.scheduling.adapters.bus import ConsumerSpec, SupervisedConsumers
from suanli.scheduling.bootstrap import Components, bootstrap
from suanli.scheduling.entrypoints.command_topic import CommandTopic
from suanli.scheduling.entrypoints.grpc_server import SchedulerServicer, start_server
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.scheduling.service_layer.admission import Admission
from suanli.scheduling.service_layer.commands import ReconcileNode, RecordTaskReport, SeedQueues
from suanli.scheduling.service_layer.errors import NotLeader
from suanli.scheduling.service_layer.queues_config import parse_queue_config
from suanli.telemetry.grpc import with_tracing

log = logging.getLogger(__name__)

VIEW_TOPICS = ("capacity.nodes", "nodes.status", "node.snapshots", "network.links")
LEADER_TOPICS = ("tasks.lifecycle",)
# Upstream producers' commands, consumed by the leader and answered on REPLIES (docs/commands.md).
COMMAND_TOPICS = ("jobs.commands",)
REPLIES = "jobs.replies"
PRODUCED = ("jobs.events", "placements", "queues.events")
REPORTS = frozenset({"TaskStarted", "TaskFinished", "TaskFailed"})
# Capacity and status updates arrive in bursts (a fleet reports at once): they wake the cycle at most once
# per this long, so a burst of hundreds runs one cycle, not hundreds. Submits and reports still wake at once.
VIEW_WAKE_DEBOUNCE_S = 0.01
NOT_LEADER_RECHECK_S = 0.5
# How long a stopping app lets the relay finish the batch in flight (then it is simply sent again).
RELAY_STOP_GRACE_S = 5.0
# Reports and snapshots wait on the service's commits: handled one at a time, the group commit would see
# one at a time (~15 reports/s under the platform bench against 60/s produced). Partitions run
# concurrently and a partition's fetched records are queued together, in offset order (the group commit
# keeps two reports of one job apart and in order). A report retried after a later one of its task is
# harmless: a task's end is accepted from any active state, and a start after its end is ignored.
CONSUMER_SETTINGS = ConsumerSettings(
    client_id="suanli-scheduling", concurrent_partitions=True, pipelined=True
)


def _retriable(exc: BaseException) -> bool:
    """Failures worth trying again later: the database or the broker (the kernel's transient
    classification), or a stream that moved on under the write (another writer appended first: the
    retry decides again on the new version)."""
    return is_transient(exc) or isinstance(exc, ConcurrencyConflict)


@dataclass
class SchedulingApp:
    config: SchedulingSettings
    components: Components | None = None
    port: int = 0
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _leader_tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _server: Any = None
    _agent_logs: AgentLogClient | None = None
    _view_wake: asyncio.TimerHandle | None = None
    _auth: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    _command_topic: CommandTopic | None = None

    @property
    def c(self) -> Components:
        assert self.components is not None, "not started"
        return self.components

    @property
    def is_leader(self) -> bool:
        return self.components is not None and self.components.leader.is_leader

    async def start(self) -> None:
        cfg = self.config
        queue_config = parse_queue_config(cfg.queues_path.read_text()) if cfg.queues_path else None
        self.components = await bootstrap(cfg)
        c = self.c
        self._queue_config = queue_config
        admission = Admission(cfg.admission_limits(), time.monotonic)
        agent_logs = AgentLogClient(cfg.agent_ca.read_bytes() if cfg.agent_ca is not None else None)
        self._agent_logs = agent_logs
        servicer = SchedulerServicer(
            c.scheduler.commands,
            c.projection,
            c.capacity,
            c.explain,
            admission,
            history=c.store,
            agent_logs=agent_logs,
        )
        auth = await self._auth.enter_async_context(server_auth(cfg))
        interceptors = with_tracing(() if auth is None else (auth.interceptor,))
        self._server, self.port, _ = await start_server(servicer, cfg.listen, interceptors, cfg)
        self._requests = servicer.requests
        topics = (*VIEW_TOPICS, *LEADER_TOPICS, *COMMAND_TOPICS, *PRODUCED, REPLIES)
        specs = [bus_topics.spec(t) for t in topics]
        view = SupervisedConsumers(
            cfg.bootstrap,
            cfg.topic_prefix,
            [ConsumerSpec(f"scheduling-view-{cfg.instance}", VIEW_TOPICS, self._on_view)],
            specs,
            check_s=cfg.topic_check_s,
            settings=CONSUMER_SETTINGS,
        )
        self._tasks = [
            asyncio.create_task(view.run(), name="scheduling-view"),
            asyncio.create_task(self._relay(), name="scheduling-relay"),
            asyncio.create_task(self._follow(), name="scheduling-follow"),
            asyncio.create_task(c.leader.run(self._elected, self._deposed), name="scheduling-election"),
        ]
        self._specs = specs
        log.info("scheduling %s serving gRPC on port %d", cfg.instance, self.port)

    async def stop(self) -> None:
        if self._view_wake is not None:
            self._view_wake.cancel()
            self._view_wake = None
        for task in [*self._leader_tasks, *self._tasks]:
            task.cancel()
        for task in [*self._leader_tasks, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._leader_tasks, self._tasks = [], []
        await self._close_command_topic()
        if self._server is not None:
            await self._server.stop(grace=1)
        if self._agent_logs is not None:
            await self._agent_logs.close()
        await self._auth.aclose()
        if self.components is not None:
            await self.components.store.close()

    # -- leadership ----------------------------------------------------------------------------------

    async def _elected(self) -> None:
        c = self.c
        if self._queue_config is not None:
            # First, before anything awaits: the seed's turn of the write lock (it catches the projection
            # up itself) is then the term's first write, so an administration RPC that raced the
            # election cannot make an empty store look administered and the file be skipped.
            await c.scheduler.commands.handle(SeedQueues(self._queue_config))
        await c.scheduler.write_lock.refresh()
        # The rebuilt projection is long-lived: keep it out of every later full collection.
        frozen = freeze_survivors()
        log.info("state rebuilt; %d objects moved out of the collector's reach", frozen)
        cfg = self.config
        c.scheduler.commands.reports_stopped()  # until the lifecycle consumer has its partitions
        self._command_topic = CommandTopic(
            self._requests,
            cfg.bootstrap,
            bus_topics.topic_name(REPLIES, cfg.topic_prefix),
            clock=SystemClock(),
            producer=f"scheduling/{cfg.instance}",
            hold=self._hold,
        )
        commands = self._command_topic
        lifecycle = SupervisedConsumers(
            cfg.bootstrap,
            cfg.topic_prefix,
            [
                ConsumerSpec("scheduling", LEADER_TOPICS, self._on_report, on_assigned=self._reports_flowing),
                ConsumerSpec(
                    "scheduling-commands",
                    COMMAND_TOPICS,
                    commands.on_command,
                    on_dead_letter=commands.on_dead_letter,
                ),
            ],
            self._specs,
            check_s=cfg.topic_check_s,
            settings=CONSUMER_SETTINGS,
        )
        self._leader_tasks = [
            asyncio.create_task(lifecycle.run(), name="scheduling-lifecycle"),
            asyncio.create_task(
                c.scheduler.loop.run(before_each=c.scheduler.evictions.sweep, retry_if=_retriable),
                name="scheduling-cycle",
            ),
            asyncio.create_task(c.snapshotter.run(cfg.snapshot_interval_s), name="scheduling-snapshots"),
        ]

    def _reports_flowing(self) -> None:
        # Reconciliation takes a task's absence from snapshots for its end only once reports flow.
        self.c.scheduler.commands.reports_flowing()

    async def _deposed(self) -> None:
        self.c.scheduler.commands.reports_stopped()
        tasks, self._leader_tasks = self._leader_tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._close_command_topic()

    async def _close_command_topic(self) -> None:
        topic, self._command_topic = self._command_topic, None
        if topic is not None:
            with contextlib.suppress(Exception):
                await topic.aclose()

    async def _follow(self) -> None:
        """A standby tails the store so its reads (and watchers) follow the leader's writes."""
        c = self.c
        while True:
            await asyncio.sleep(self.config.standby_poll_s)
            if c.leader.is_leader:
                continue
            try:
                await c.scheduler.write_lock.follow()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("standby catch-up failed: %r", exc)

    async def _relay(self) -> None:
        cfg = self.config
        while True:
            try:
                produced = [bus_topics.topic_name(t, cfg.topic_prefix) for t in PRODUCED]
                async with EventPublisher(cfg.bootstrap, settings=RELAY_PRODUCER) as publisher:
                    relay = OutboxRelay(
                        PostgresOutboxFeed(cfg.dsn, schema=cfg.store_schema),
                        KafkaOutboxSink(publisher),
                        poll_interval=0.5,
                        metrics=OutboxMetrics(topics=produced),
                    )
                    # The relay runs in its own task and is stopped, not cancelled, when this one is:
                    # a batch published but not yet marked would be published again after a restart.
                    await relay.start()
                    try:
                        await asyncio.Future()  # until the app stops
                    finally:
                        await relay.stop(grace_s=RELAY_STOP_GRACE_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("outbox relay failed, restarting: %r", exc)
                await asyncio.sleep(1.0)

    # -- consumers -----------------------------------------------------------------------------------

    async def _on_view(self, event: ConsumedEvent) -> None:
        if event.tombstone:
            return
        c = self.c
        name, record = event.event_name, event.record
        if name == "NodeCapacityChanged":
            c.capacity.on_capacity(record)
            self._wake_soon()
        elif name == "NodeStatusChanged":
            c.capacity.on_status(record)
            self._wake_soon()
        elif name == "NodeSnapshot":
            c.capacity.on_snapshot(record)
            if c.leader.is_leader:
                # Each instance reads snapshots in its own group and the next snapshot carries the same
                # full state, so one that raced a deposition is simply the new leader's to reconcile.
                with contextlib.suppress(NotLeader):
                    await self._write(ReconcileNode(record))
        elif name == "NetworkLinkChanged" and c.network.on_link(record):
            # A job waiting on its network constraint may fit now; running tasks are never moved for it.
            self._wake_soon()
        # anything else on these topics (NodeRegistered) carries nothing the scheduler needs

    def _wake_soon(self) -> None:
        """Wake the cycle within VIEW_WAKE_DEBOUNCE_S; updates until then share that one wake."""
        if self._view_wake is None:
            self._view_wake = asyncio.get_running_loop().call_later(VIEW_WAKE_DEBOUNCE_S, self._wake_now)

    def _wake_now(self) -> None:
        self._view_wake = None
        if self.components is not None:
            self.components.scheduler.loop.wake()

    async def _on_report(self, event: ConsumedEvent) -> None:
        if event.event_name not in REPORTS:
            raise ValueError(f"{event.event_name!r} does not belong on tasks.lifecycle")
        for key in ("task_id", "job_id", "node_id", "attempt"):
            if key not in event.record:
                raise ValueError(f"{event.event_name} without {key}")
        try:
            await self._write(RecordTaskReport(event.event_name, event.record, event.event_id or ""))
        except NotLeader:
            await self._hold()

    async def _hold(self) -> NoReturn:
        """A record that met a deposition. Handled here, its offset would be committed and the next
        leader, starting from it, would never see it: a finished task would look lost and run again, a
        command would go unanswered. Hold it uncommitted until the deposition cancels its consumer (or
        leadership came back: then it is tried again)."""
        while not self.c.leader.is_leader:
            await asyncio.sleep(NOT_LEADER_RECHECK_S)
        raise RetriableError("leadership came back while a record was held") from None

    async def _write(self, command: Any) -> None:
        """Raises NotLeader when this instance no longer leads; the caller decides what that means."""
        try:
            await self.c.scheduler.commands.handle(command)
        except NotLeader:
            raise
        except Exception as exc:
            if not _retriable(exc):
                raise
            raise RetriableError(f"{type(command).__name__}: {exc!r}") from exc


async def serve(config: SchedulingSettings) -> None:
    from suanli.telemetry import setup

    # INFO: cycles that decide something, requeues, lost nodes, leadership (each aggregated where
    # frequent, so the log never becomes the bottleneck); the supervisor sends it to scheduling.log.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    telemetry = setup("scheduling", metrics_port=config.metrics_port)
    tune_for_latency()
    app = SchedulingApp(config)
    await app.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await app.stop()
        telemetry.shutdown()


__all__ = ["SchedulingApp", "serve"]
