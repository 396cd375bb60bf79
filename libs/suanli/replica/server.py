"""A simulated replica as an HTTP server: `LiveReplica` driven in real time by the event loop's clock.

``POST /generate`` with a JSON body ``{"context_tokens": N, "max_tokens": M, ...}`` is submitted at its
arrival and answered when the model says it finishes (a timer at the model's next event), with
``{"generated_tokens", "ttft_s", "latency_s", "replica_id"}``. A body that cannot be served answers 400
with the reason; a request over the queue or KV bound 503 with the reason and ``Retry-After`` (refused
at once: another replica, or this one a moment later, may take it); one that waited past the queue
timeout 503 with the reason and no ``Retry-After`` (its time is spent: trying it again elsewhere would
only queue it behind others' work, which is why the gateway does not). Every ``interval_s`` the
replica's load report goes to the ``on_report`` callback (the node agent publishes it as
ReplicaLoadReported). Docs: docs/inference.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from suanli.clock import Clock
from suanli.contracts.load import ReplicaLoad
from suanli.replica.live import (
    BadGenerate,
    Dropped,
    LiveReplica,
    Overloaded,
    ReplicaIdentity,
    Served,
    parse_generate,
)
from suanli.replica.reporting import ReportSink, report_every
from suanli.replica.service_time import ReplicaSpeed

RETRY_AFTER_S = "1"
# The grace open connections get at stop; aiohttp reads 0 as no limit at all.
SHUTDOWN_S = 0.05


class ReplicaServer:
    """One simulated replica listening on ``host:port`` (port 0 picks one; `address` tells which)."""

    def __init__(
        self,
        identity: ReplicaIdentity,
        speed: ReplicaSpeed,
        *,
        interval_s: float,
        on_report: ReportSink,
        clock: Clock,
        queue_timeout_s: float = 30.0,
        max_queued: int = 256,
    ) -> None:
        self._identity = identity
        self._speed = speed
        self._interval_s = interval_s
        self._queue_timeout_s = queue_timeout_s
        self._max_queued = max_queued
        self._on_report = on_report
        self._clock = clock
        self.replica: LiveReplica | None = None
        self.address = ""
        self._runner: web.AppRunner | None = None
        self._waiting: dict[int, asyncio.Future[Served | Dropped]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._reporter: asyncio.Task[None] | None = None
        self._t0 = 0.0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen, start reporting; the bound HOST:PORT (also in every report)."""
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        # Next to no grace at stop: a stopped replica is a killed one, its open requests are cut off.
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=SHUTDOWN_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            raise
        bound = self._runner.addresses[0][1]
        self.address = f"{host}:{bound}"
        identity = ReplicaIdentity(
            self._identity.service_id, self._identity.replica_id, self._identity.region, self.address
        )
        self.replica = LiveReplica(
            identity,
            self._speed,
            interval_s=self._interval_s,
            queue_timeout_s=self._queue_timeout_s,
            max_queued=self._max_queued,
        )
        self._t0 = asyncio.get_running_loop().time()
        self._reporter = asyncio.create_task(
            report_every(self._interval_s, self._report, self._on_report, identity.replica_id),
            name=f"report-{identity.replica_id}",
        )
        return self.address

    async def stop(self) -> None:
        """Stop listening and reporting at once: connections close, waiting requests are cut off."""
        if self._reporter is not None:
            self._reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reporter
            self._reporter = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # Requests waiting for the model end first: the server's shutdown waits for its handlers.
        for waiting in self._waiting.values():
            waiting.cancel()
        self._waiting.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _now_s(self) -> float:
        return asyncio.get_running_loop().time() - self._t0

    async def _generate(self, request: web.Request) -> web.Response:
        assert self.replica is not None
        try:
            doc = json.loads(await request.read() or b"null")
        except ValueError as exc:
            return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
        try:
            request_id, ended = self.replica.submit(parse_generate(doc), self._now_s())
        except BadGenerate as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except Overloaded as exc:
            return _unavailable(str(exc))
        answer: asyncio.Future[Served | Dropped] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        self._settle(ended)
        self._rearm()
        try:
            outcome = await answer
        finally:
            self._waiting.pop(request_id, None)
        if isinstance(outcome, Dropped):
            return web.json_response({"error": outcome.reason}, status=503)
        return web.json_response(
            {
                "generated_tokens": outcome.generated_tokens,
                "ttft_s": outcome.ttft_s,
                "latency_s": outcome.latency_s,
                "replica_id": self._identity.replica_id,
            }
        )

    def _settle(self, ended: list[Served | Dropped]) -> None:
        for outcome in ended:
            waiting = self._waiting.get(outcome.request_id)
            if waiting is not None and not waiting.done():
                waiting.set_result(outcome)

    def _rearm(self) -> None:
        """Wake at the model's next event (a prefill or decode ending), or not at all when idle."""
        assert self.replica is not None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        at = self.replica.next_event_s()
        if at != float("inf"):
            self._timer = asyncio.get_running_loop().call_at(self._t0 + at, self._tick)

    def _tick(self) -> None:
        assert self.replica is not None
        self._timer = None
        self._settle(self.replica.advance(self._now_s()))
        self._rearm()

    async def _report(self) -> ReplicaLoad:
        assert self.replica is not None
        self._settle(self.replica.advance(self._now_s()))
        self._rearm()
        return self.replica.report(self._clock.now())


def _unavailable(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=503, headers={"Retry-After": RETRY_AFTER_S})
