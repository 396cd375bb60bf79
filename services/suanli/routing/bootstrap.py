"""The one place routing's adapters are chosen and wired: clock, ids, price book, views, metrics."""

from __future__ import annotations

from collections.abc import Iterable

from suanli.bus.metrics import BusMetrics
from suanli.bus.retry import SERVICE_RETRY
from suanli.clock import Clock, IdFactory, SystemClock, to_ms, uuid4_factory
from suanli.contracts.load import LoadView
from suanli.resources.pricebook_file import load_pricebook
from suanli.routing.adapters.metrics import ResolveMetrics, ViewMetrics
from suanli.routing.domain.links import LinkState
from suanli.routing.domain.view import NetworkView
from suanli.routing.entrypoints.api import RoutingApi
from suanli.routing.entrypoints.grpc_server import RoutingServicer
from suanli.routing.entrypoints.processor import NetworkViewProcessor
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.service_layer.capacity import CapacityState
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.replicas import ReplicaResolver
from suanli.routing.service_layer.router import Router


def routing_api(settings: RoutingSettings, *, clock: Clock | None = None) -> RoutingApi:
    """The API with its read views; the price book is read (and validated) here, once."""
    clock = clock or SystemClock()
    network, capacity, loads = NetworkState(), CapacityState(), LoadView()
    router = Router(network, capacity, load_pricebook(settings.pricebook), settings.scoring_policy, clock)
    replicas = ReplicaResolver(
        loads,
        network,
        clock.now,
        intra_region_ms=settings.intra_region_rtt_ms,
        spill_margin_s=settings.spill_margin_s,
    )
    servicer = RoutingServicer(router, network, ResolveMetrics(), replicas)
    return RoutingApi(settings, servicer, network, capacity, loads)


def view_processor(
    settings: RoutingSettings,
    seed: Iterable[LinkState],
    *,
    clock: Clock | None = None,
    ids: IdFactory = uuid4_factory,
) -> NetworkViewProcessor:
    """The faust app folding probe rounds into a view seeded with ``seed`` (network.links read back)."""
    clock = clock or SystemClock()
    view = NetworkView(settings.view_policy)
    view.seed(seed, to_ms(clock.now()))
    return NetworkViewProcessor(
        settings,
        view,
        clock=clock,
        ids=ids,
        metrics=ViewMetrics(),
        # The bus's own policy: routing retries and dead-letters as every EventConsumer does.
        retry=SERVICE_RETRY,
        bus_metrics=BusMetrics(settings.group_id),
    )
