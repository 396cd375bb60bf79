"""`suanli up`'s inference service: created through serving, driven by the Azure trace through the gateway.

At start the demo creates `DEMO_SERVICE` (a small model on half an L40S, a latency SLO) in globex's queue
and replays the Azure conversation trace against it through the platform's gateway (`suanli gateway`, a
supervised process of the stack) on an event loop of its own thread, so the synchronous run loop only
reads figures. Each poll reads the service (GetService: desired count, replicas and their jobs); at the
end, GPU-seconds are the scheduler's accounting of every replica job seen (inference_figures.py).
The replay starts once `min_replicas` replicas report load (at most `READY_WAIT_S`): traffic is pointed
at a deployed service, as the simulator starts warm; before, the first requests met a service with no
replica yet (404, then 503) while the first two started. Requests the gateway cannot place still count
as failed, honestly.
Docs: docs/demo.md, "Inference"; docs/inference.md, "The live demo".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import grpc

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.api.serving.v1 import serving_pb2_grpc
from suanli.cli.client import UNARY_TIMEOUT_S
from suanli.cli.config import bearer_channel
from suanli.inference.attainment import DriveStats, DriveSummary, SloTarget
from suanli.inference.drive import DriveConfig, Driver, window
from suanli.inference.setup import load_trace
from suanli.platform.demo_service import DEFAULT_SPEED, STOP_GRACE_S, TENANT, demo_spec
from suanli.platform.inference_figures import (
    InferenceStatus,
    InferenceSummary,
    ReplicaTrack,
    gpu_seconds,
    summarise,
)

CLOSE_WAIT_S = 10.0  # at the end: how long the replay may take to wind up before its answers are given up
# At the start: how long the replay waits for the service's first replicas to report load (the cold
# start is 10 s, placing and starting a few more on the loaded 2-core machine); then it starts anyway.
READY_WAIT_S = 60.0
READY_POLL_S = 0.5


async def until_reporting(
    reporting: Callable[[], int],
    needed: int,
    stop: asyncio.Event,
    wait_s: float = READY_WAIT_S,
    poll_s: float = READY_POLL_S,
) -> bool:
    """Wait until `reporting()` (a blocking call, run off the loop) counts `needed` replicas: True; False
    when `wait_s` passed or `stop` was set first."""
    deadline = time.monotonic() + wait_s
    while not stop.is_set():
        if await asyncio.to_thread(reporting) >= needed:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), min(poll_s, left))
    return False


class LiveInference:
    """The demo's service and its replay; `close()` stops the replay and tells the final figures."""

    def __init__(
        self,
        serving_addr: str,
        scheduler_addr: str,
        gateway_url: str,
        token: str,
        ca_pem: bytes | None,
        speed: float = DEFAULT_SPEED,
    ) -> None:
        self._serving_channel = bearer_channel(serving_addr, token, ca_pem)
        self._scheduler_channel = bearer_channel(scheduler_addr, token, ca_pem)
        self.serving = serving_pb2_grpc.ServingStub(self._serving_channel)
        self.scheduler = scheduler_pb2_grpc.SchedulerStub(self._scheduler_channel)
        self.spec = demo_spec()
        self.summary = InferenceSummary(self.spec["name"], self.spec["model"], gateway_url, speed)
        self.track = ReplicaTrack()
        self.started = time.monotonic()
        target = self.spec["target"]
        self.stats = DriveStats(SloTarget(target["ttft_ms"] / 1000, target["tpot_ms"] / 1000))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._replay: Any = None  # concurrent.futures.Future of the replay
        self._driver: Driver | None = None

    # -- start --

    def start(self) -> None:
        """Create the service and start replaying the trace; a refusal is kept as the summary's problem."""
        try:
            service = self.serving.CreateService(
                spb.CreateServiceRequest(queue=TENANT, spec=json.dumps(self.spec)), timeout=UNARY_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            self.summary.problem = f"serving refused the demo service: {exc.code().name}: {exc.details()}"
            return
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="suanli-inference", daemon=True)
        self._thread.start()
        trace = window(load_trace(), 0.0, None, self.summary.speed)
        cfg = DriveConfig(self.summary.gateway, service.service_id)
        self._replay = asyncio.run_coroutine_threadsafe(self._run(cfg, trace), self._loop)

    async def _run(self, cfg: DriveConfig, trace: Any) -> None:
        self._stop = asyncio.Event()
        await until_reporting(self._reporting, self.spec["min_replicas"], self._stop)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=cfg.max_in_flight)) as http:
            self._driver = Driver(http, cfg, self.stats)
            await self._driver.replay(trace, self._stop, grace_s=STOP_GRACE_S)

    def _reporting(self) -> int:
        """Replicas of the service with a fresh load report in serving's view (0 while it does not answer)."""
        try:
            service = self.serving.GetService(
                spb.GetServiceRequest(tenant=TENANT, name=self.spec["name"]), timeout=UNARY_TIMEOUT_S
            )
        except grpc.RpcError:
            return 0
        return sum(r.HasField("load") for r in service.replicas)

    # -- each poll --

    def poll(self) -> None:
        """Read the service's replicas (a missed answer is tried at the next poll)."""
        if self.summary.problem:
            return
        with contextlib.suppress(grpc.RpcError):
            service = self.serving.GetService(
                spb.GetServiceRequest(tenant=TENANT, name=self.spec["name"]), timeout=UNARY_TIMEOUT_S
            )
            replicas = [(r.state, r.job_id) for r in service.replicas]
            self.track.observe(time.monotonic() - self.started, service.desired_replicas, replicas)

    def drive_summary(self) -> DriveSummary | None:
        """The replay's figures now, computed on its own loop (the figures change only there)."""
        if self._loop is None or self._driver is None:
            return None
        driver = self._driver

        async def read() -> DriveSummary:
            return self.stats.summary(driver.elapsed())

        with contextlib.suppress(TimeoutError, RuntimeError):
            return asyncio.run_coroutine_threadsafe(read(), self._loop).result(timeout=5)
        return None

    def status(self) -> InferenceStatus:
        events = self.track.scale_events
        last = ""
        if events:
            last = f"{events[-1].replicas_from}→{events[-1].replicas_to} at {events[-1].at_s:.0f}s"
        return InferenceStatus(
            self.summary.service,
            self.summary.model,
            self.track.desired,
            dict(self.track.states),
            self.drive_summary(),
            len(events),
            last,
            self.summary.problem,
        )

    # -- the end --

    def stop_sending(self) -> None:
        """Submission stopped: no new requests (those in flight are still waited for)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    def close(self) -> InferenceSummary:
        """Stop the replay, read the final figures and the replica jobs' GPU-seconds, close the channels."""
        self.stop_sending()
        if self._replay is not None:
            with contextlib.suppress(Exception):
                self._replay.result(timeout=CLOSE_WAIT_S)
            if not self._replay.done() and self._loop is not None and self._driver is not None:
                # Still waiting for answers (Ctrl-C, or a drain shorter than the grace): those count as
                # failed, `unanswered at stop`, rather than hold up the platform's stop.
                with contextlib.suppress(Exception):
                    give_up = asyncio.run_coroutine_threadsafe(self._driver.finish(0.0), self._loop)
                    give_up.result(CLOSE_WAIT_S)
                with contextlib.suppress(Exception):
                    self._replay.result(timeout=CLOSE_WAIT_S)
        drive = self.drive_summary()
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
        self.poll()
        summary = summarise(self.summary, drive, self.track, self._gpu_seconds())
        self._serving_channel.close()
        self._scheduler_channel.close()
        return summary

    def _gpu_seconds(self) -> float | None:
        hours = []
        try:
            for job_id in sorted(self.track.job_ids):
                described = self.scheduler.DescribeJob(
                    pb.DescribeJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S
                )
                hours.append(described.accounting.gpu_hours)
        except grpc.RpcError:
            return None
        return gpu_seconds(hours)
