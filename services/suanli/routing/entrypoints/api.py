"""The Routing API as one component: its read views and the gRPC server.

The network and capacity views are compacted topics read whole. The load view (ResolveReplica's input)
follows ``services.load`` in a consumer group of its own per instance, from the newest reports on: a
report is full state, so the next round of reports is all a new instance needs. Anything there but a
valid ``ReplicaLoadReported`` is dead-lettered to ``services.load.dlq`` with the reason (once per
instance, as serving's load view does).

Health is NOT_SERVING until the compacted views have read their topics to the end offsets seen at start
and the load consumer holds its partitions, so a restarted instance answers only once its views are
rebuilt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc
from grpc_health.v1 import health

from suanli.auth.server import server_auth
from suanli.bus import BrokerWatch, ConsumedEvent, ConsumerSettings, KeptConsumer
from suanli.bus.kept import DEFAULT_CHECK_S
from suanli.clock import to_ms, uuid4_factory
from suanli.contracts.load import LoadView, load_from_record
from suanli.errors import InvalidArgument
from suanli.routing.adapters.compacted import CompactedReader
from suanli.routing.entrypoints.grpc_server import RoutingServicer, serving, start_server
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.entrypoints.topics import RoutingTopics
from suanli.routing.service_layer.capacity import CapacityState
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.records import EVENT, link_state
from suanli.telemetry.grpc import with_tracing

log = logging.getLogger(__name__)
CAPACITY_EVENT = "NodeCapacityChanged"
LOAD_EVENT = "ReplicaLoadReported"


class NotALoadReport(InvalidArgument):
    """A record on services.load that decodes but is another event (dead-lettered)."""


class RoutingApi:
    def __init__(
        self,
        settings: RoutingSettings,
        servicer: RoutingServicer,
        network: NetworkState,
        capacity: CapacityState,
        loads: LoadView,
    ) -> None:
        self.settings = settings
        self.servicer = servicer
        self.network = network
        self.capacity = capacity
        self.loads = loads
        names = RoutingTopics(settings.topic_prefix)
        self.readers = (
            CompactedReader(
                settings.bootstrap, names.links, self._on_link, fetch_wait_ms=settings.fetch_wait_ms
            ),
            CompactedReader(
                settings.bootstrap, names.capacity, self._on_capacity, fetch_wait_ms=settings.fetch_wait_ms
            ),
        )
        # Its first look (start) creates the topics; later ones tell the load consumer's keeper that
        # the broker started over.
        self._watch = BrokerWatch(settings.bootstrap, RoutingTopics.specs(), prefix=settings.topic_prefix)
        self.load_consumer = KeptConsumer.of(
            settings.bootstrap,
            f"{settings.group_id}-load-{uuid4_factory().hex[:8]}",
            [names.load],
            self._on_load,
            watch=self._watch,
            name="load-report consumer",
            settings=ConsumerSettings(
                auto_offset_reset="latest",
                fetch_max_wait_ms=settings.fetch_wait_ms,
                client_id="suanli-routing",
            ),
        )
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self._health: health.HealthServicer | None = None
        self._ready: asyncio.Task[None] | None = None
        self._rewinding: asyncio.Task[None] | None = None
        self.rewinds = 0  # times the view readers went back to the beginning: the broker started over
        self._auth = contextlib.AsyncExitStack()

    def _on_link(self, name: str, record: dict[str, Any]) -> None:
        if name == EVENT:
            self.network.apply(link_state(record))

    def _on_capacity(self, name: str, record: dict[str, Any]) -> None:
        if name == CAPACITY_EVENT:
            self.capacity.apply(record, to_ms(record["occurred_at"]))

    async def _on_load(self, event: ConsumedEvent) -> None:
        if event.tombstone:
            return
        if event.event_name != LOAD_EVENT:
            raise NotALoadReport(f"{event.event_name or 'an unnamed record'}: only {LOAD_EVENT} belongs here")
        self.loads.report(load_from_record(event.record), self.servicer.replicas.now())

    async def start(self) -> None:
        await self._watch.look()
        for reader in self.readers:
            await reader.start()
        # Its own watch: the load consumer's keeper looks with the other.
        self._rewinding = asyncio.create_task(self._rewind_on_restart(self._watch.fork()))
        await self._auth.enter_async_context(self.load_consumer)
        auth = await self._auth.enter_async_context(server_auth(self.settings))
        interceptors = with_tracing(() if auth is None else (auth.interceptor,))
        self.server, self.port, self._health = await start_server(
            self.servicer, self.settings.listen, interceptors, self.settings
        )
        self._ready = asyncio.create_task(self._serve_when_caught_up())
        log.info("routing API on port %d", self.port)

    async def _serve_when_caught_up(self) -> None:
        for reader in self.readers:
            await reader.caught_up.wait()
        await self.load_consumer.wait_assigned()
        assert self._health is not None
        serving(self._health)
        log.info("routing views rebuilt: %d links, serving", len(self.network.links))

    async def _rewind_on_restart(self, watch: BrokerWatch) -> None:
        """Every few seconds: when the broker started over, the view readers read from the beginning."""
        while True:
            await asyncio.sleep(DEFAULT_CHECK_S)
            try:
                started_over = await watch.look()
            except Exception as exc:  # the broker is away: the readers wait for it on their own
                log.warning("cannot look at the broker: %r", exc)
                continue
            if started_over:
                log.warning("the broker started over: reading the view topics from the beginning")
                self.rewinds += 1
                for reader in self.readers:
                    await reader.rewind()

    async def ready(self) -> None:
        """Wait until the API serves (health SERVING): its views rebuilt, its load reports flowing."""
        assert self._ready is not None, "start() first"
        await asyncio.shield(self._ready)

    async def stop(self) -> None:
        for task in (self._ready, self._rewinding):
            if task is not None:
                task.cancel()
        if self.server is not None:
            await self.server.stop(grace=1.0)
        await self._auth.aclose()
        for reader in self.readers:
            await reader.stop()
