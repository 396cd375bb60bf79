"""`suanli serve routing`: the network-view processor and the Routing API, in one process or apart.

With role ``all`` (the default) one process runs both: the faust worker owns the main thread and its
event loop (faust's worker installs its signal handlers there), the API runs on its own event loop in a
second thread. The two share nothing in memory: the API reads ``network.links`` like any other reader,
so they can also run as separate processes (roles ``view`` and ``api``) and be scaled apart. One
process is what `suanli up` runs: one thing to supervise, and a SIGKILL takes both down together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from typing import Any

from suanli.bus import ensure_topics
from suanli.bus.faust import run_worker
from suanli.routing.adapters.compacted import CompactedReader
from suanli.routing.bootstrap import routing_api, view_processor
from suanli.routing.domain.links import LinkState
from suanli.routing.entrypoints.settings import Role, RoutingSettings
from suanli.routing.entrypoints.topics import RoutingTopics
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.records import EVENT, link_state
from suanli.telemetry import setup

log = logging.getLogger(__name__)
SEED_TIMEOUT_S = 60.0


async def read_view(settings: RoutingSettings) -> list[LinkState]:
    """Every link state on network.links (the newest per link), for the processor to start from."""
    held = NetworkState()

    def keep(name: str, record: dict[str, Any]) -> None:
        if name == EVENT:
            held.apply(link_state(record))

    reader = CompactedReader(
        settings.bootstrap,
        RoutingTopics(settings.topic_prefix).links,
        keep,
        fetch_wait_ms=settings.fetch_wait_ms,
    )
    await reader.start()
    try:
        await asyncio.wait_for(reader.caught_up.wait(), SEED_TIMEOUT_S)
    finally:
        await reader.stop()
    return list(held.links.values())


async def run_api(settings: RoutingSettings, stop: asyncio.Event) -> None:
    api = routing_api(settings)
    await api.start()
    try:
        await stop.wait()
    finally:
        await api.stop()


class ApiThread:
    """The API on its own event loop in a daemon thread; `start` returns once it listens."""

    def __init__(self, settings: RoutingSettings) -> None:
        self.settings = settings
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="routing-api", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        api = routing_api(self.settings)
        try:
            await api.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await api.stop()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)


def run_view(settings: RoutingSettings, *, loglevel: str = "info") -> None:
    """The faust worker on this thread; blocks until it is stopped (SIGINT/SIGTERM)."""
    # faust runs on the loop current when the worker is built; topics must exist (with their partition
    # counts and compaction, which only creation can set on Tansu) before any agent subscribes.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(
        ensure_topics(settings.bootstrap, RoutingTopics.specs(), prefix=settings.topic_prefix)
    )
    seed = loop.run_until_complete(read_view(settings))
    processor = view_processor(settings, seed)
    log.info("routing view %s on %s, %d links seeded", settings.group_id, settings.bootstrap, len(seed))
    run_worker(processor.app, loop, loglevel=loglevel)


def _api_only(settings: RoutingSettings) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_api(settings, stop)

    asyncio.run(main())


def serve(settings: RoutingSettings, *, loglevel: str = "info") -> None:
    telemetry = setup("routing", metrics_port=settings.metrics_port)
    try:
        if settings.role is Role.API:
            _api_only(settings)
            return
        api = ApiThread(settings) if settings.role is Role.ALL else None
        if api is not None:
            api.start()
        try:
            run_view(settings, loglevel=loglevel)
        finally:
            if api is not None:
                with contextlib.suppress(Exception):
                    api.stop()
    finally:
        telemetry.shutdown()
