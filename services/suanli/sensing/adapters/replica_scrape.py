"""Real replicas: a real agent's replica task gets a port, and its load is scraped and published.

A placement whose environment names a replica (`suanli.contracts.replica_env`) is told the port to serve
on (``SUANLI_SERVICE_PORT``); the replica's address is the agent's replica host and that port. While the
task runs, ``GET http://ADDRESS/metrics`` is read every report interval (vLLM's metric names, mapped by
domain.replica_metrics) and published as ReplicaLoadReported through the agent's sink, like a simulated
replica's reports. A scrape that fails (the server still loading, garbage, a timeout) sends nothing that
interval, so a replica is routed to only once it answers; each distinct failure is logged once. The
reports stop when the task is asked to stop, before it has exited: a replica going away draws no new
traffic. Docs: docs/inference.md, "Real replicas: the load they report".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping

import aiohttp

from suanli.clock import Clock, IdFactory
from suanli.contracts.load import InvalidLoad, ReplicaLoad
from suanli.contracts.replica_env import MODEL_ENV
from suanli.errors import InvalidArgument
from suanli.replica.live import ReplicaIdentity
from suanli.replica.models import MODELS
from suanli.replica.reporting import ReportSink, report_every
from suanli.replica.service_time import ReplicaSpeed, replica_speed
from suanli.resources import DeviceCatalogue
from suanli.sensing.adapters.replicas import (
    LoadPublisher,
    placement_gpus,
    replica_identity,
    replica_max_batch,
)
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.placement import Placement
from suanli.sensing.domain.replica_metrics import (
    Fallbacks,
    MetricsError,
    VllmSample,
    parse_vllm_metrics,
    recent_latency_s,
    replica_load,
)
from suanli.sensing.service_layer.ports import EventSink

log = logging.getLogger(__name__)

# Distinct failures remembered for logging once each; past it, none is logged (a server whose errors
# all differ should not grow the agent's memory).
MAX_REMEMBERED_ERRORS = 64
# A scrape may take at most this much of the interval: the next one is due then.
SCRAPE_SHARE = 0.8


def free_port(host: str = "") -> int:
    """A TCP port nothing listens on now. Another process may take it before the replica binds it: the
    replica then fails to start, and serving places it again (docs/inference.md)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class ReplicaScraper:
    """Scrapes one real replica's ``/metrics`` every interval and reports its load, until stopped."""

    def __init__(
        self,
        identity: ReplicaIdentity,
        fallbacks: Fallbacks,
        *,
        interval_s: float,
        on_report: ReportSink,
        clock: Clock,
    ) -> None:
        self.identity = identity
        self._fallbacks = fallbacks
        self._interval_s = interval_s
        self._on_report = on_report
        self._clock = clock
        self._url = f"http://{identity.address}/metrics"
        self._previous: VllmSample | None = None
        self._latency_s = 0.0
        self._logged: set[str] = set()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(
            report_every(self._interval_s, self.scrape, self._on_report, self.identity.replica_id),
            name=f"scrape-{self.identity.replica_id}",
        )

    def cancel(self) -> None:
        """Send no more reports (a report being sent may still arrive)."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def scrape(self) -> ReplicaLoad | None:
        """The replica's load now; None when its page cannot be read or is not a model server's."""
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self._interval_s * SCRAPE_SHARE)
            self._session = aiohttp.ClientSession(timeout=timeout)
        try:
            async with self._session.get(self._url) as response:
                response.raise_for_status()
                text = await response.text()
            sample = parse_vllm_metrics(text)
            latency_s = recent_latency_s(sample, self._previous, self._latency_s)
            load = replica_load(
                sample,
                latency_s,
                identity=self.identity,
                fallbacks=self._fallbacks,
                interval_s=self._interval_s,
                now=self._clock.now(),
            )
        except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError, MetricsError, InvalidLoad) as exc:
            self._failed(exc)
            return None
        self._previous, self._latency_s = sample, latency_s
        return load

    def _failed(self, exc: Exception) -> None:
        what = f"{type(exc).__name__}: {exc}"
        if what in self._logged or len(self._logged) >= MAX_REMEMBERED_ERRORS:
            return
        self._logged.add(what)
        log.warning("%s: no load report from %s: %s", self.identity.replica_id, self._url, what)


class RealReplicaHosting:
    """What a real agent needs to report its replica tasks' load: where they serve, the bus, time, and
    the node's GPU models (device index -> NVML name) for the speed figures a metrics page lacks."""

    def __init__(
        self,
        node: NodeIdentity,
        sink: EventSink,
        clock: Clock,
        ids: IdFactory,
        *,
        host: str,
        interval_s: float,
        catalogue: DeviceCatalogue,
        gpu_models: Mapping[int, str] | None = None,
    ) -> None:
        self.node = node
        self.host = host
        self.interval_s = interval_s
        self._publish = LoadPublisher(node, sink, ids)
        self._clock = clock
        self._catalogue = catalogue
        self._gpu_models = dict(gpu_models or {})

    def scraper(self, placement: Placement, port: int) -> ReplicaScraper:
        """The (unstarted) scraper of `placement`'s replica serving on `port`; `LaunchError` when the
        placement's replica settings cannot be."""
        address = f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"
        identity = replica_identity(placement, self.node.region, address)
        max_batch = replica_max_batch(placement)
        fallbacks = Fallbacks(max_batch, self._speed(placement, max_batch))
        return ReplicaScraper(
            identity, fallbacks, interval_s=self.interval_s, on_report=self._publish, clock=self._clock
        )

    def _speed(self, placement: Placement, max_batch: int) -> ReplicaSpeed | None:
        """The service-time model's speed when the model and the placed GPU are known; else None."""
        model = MODELS.get(placement.env.get(MODEL_ENV, ""))
        gpu = next((self._gpu_models.get(i) for i in placement.device_indices), None)
        if model is None or gpu is None:
            return None
        device = self._catalogue.lookup(gpu)
        if not device.known:
            return None
        try:
            return replica_speed(model, device, placement_gpus(placement), max_batch)
        except InvalidArgument:  # the model does not fit the share: the server's problem, not reporting's
            return None
