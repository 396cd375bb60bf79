"""Replay the Azure trace's arrivals as HTTP requests to a gateway (`suanli service drive`, `suanli up`).

Open loop, as users arrive: request i is sent at its trace offset (divided by the speed) whether or not
the earlier ones were answered, with body ``{"context_tokens": C, "max_tokens": G}`` from the trace, to
``{gateway}/v1/services/{service_id}/generate``. At most `max_in_flight` requests are outstanding; an
arrival beyond that is not sent and counts as failed (`over max in-flight`), so the replay keeps the
trace's timing and its memory stays bounded. Each ended request becomes an `Outcome` folded into
`DriveStats` (attainment.py). Docs: docs/inference.md, "Driving the trace".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from suanli.inference.attainment import DriveStats, Outcome
from suanli.serving.domain.trace import Trace

DEFAULT_MAX_IN_FLIGHT = 256
DEFAULT_TIMEOUT_S = 120.0
OVER_IN_FLIGHT = "over max in-flight"
UNANSWERED = "unanswered at stop"


@dataclass(frozen=True, slots=True)
class DriveConfig:
    gateway: str  # http://host:port
    service_id: str
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def url(self) -> str:
        return f"{self.gateway.rstrip('/')}/v1/services/{self.service_id}/generate"


def window(trace: Trace, start_s: float, limit: int | None, speed: float) -> Trace:
    """The requests from `start_s` seconds into the trace on (at most `limit`), replayed from 0, `speed`
    times as fast."""
    chosen = trace.window(start_s, float("inf")).rebased(start_s)
    if limit is not None:
        chosen = Trace(
            chosen.offset_s[:limit], chosen.context_tokens[:limit], chosen.generated_tokens[:limit]
        )
    return chosen.compressed(speed)


def _answer_figures(payload: bytes, asked: int) -> tuple[int, float | None, float | None]:
    """(generated tokens, the replica's TTFT, the replica's latency) from an answer, where it says them."""
    try:
        doc = json.loads(payload)
    except ValueError:
        return asked, None, None
    if not isinstance(doc, dict):
        return asked, None, None
    generated = doc.get("generated_tokens")

    def seconds(name: str) -> float | None:
        value = doc.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return None
        return float(value)

    return (
        generated if isinstance(generated, int) and generated > 0 else asked,
        seconds("ttft_s"),
        seconds("latency_s"),
    )


class Driver:
    """One replay; `stats` is read by whoever shows it (the loop is single-threaded: no lock needed
    within it, and `suanli up` reads a copy through `snapshot`)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        cfg: DriveConfig,
        stats: DriveStats,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.cfg = cfg
        self.stats = stats
        self.clock = clock
        self.started = 0.0
        self.finished = 0.0  # when the replay's last request ended: its figures' span
        self.sent = 0
        self._in_flight: dict[asyncio.Task[None], int] = {}  # each request -> its generated tokens

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def elapsed(self) -> float:
        """Seconds since the replay started, or its whole span once it has finished."""
        if not self.started:
            return 0.0
        return (self.finished or self.clock()) - self.started

    async def replay(
        self, trace: Trace, stop: asyncio.Event | None = None, grace_s: float | None = None
    ) -> None:
        """Send every request of `trace` on time (until `stop` is set), then wait for the answers (at most
        `grace_s` after the last send, when given)."""
        stop = stop or asyncio.Event()
        self.started = self.clock()
        for offset, context, generated in zip(
            trace.offset_s.tolist(),
            trace.context_tokens.tolist(),
            trace.generated_tokens.tolist(),
            strict=True,
        ):
            wait = self.started + offset - self.clock()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
            if stop.is_set():
                break
            self.sent += 1
            if len(self._in_flight) >= self.cfg.max_in_flight:
                self.stats.record(Outcome(self.elapsed(), 0, 0.0, generated, reason=OVER_IN_FLIGHT))
                continue
            task = asyncio.create_task(self._request(context, generated))
            self._in_flight[task] = generated
            task.add_done_callback(self._done)
        await self.finish(grace_s)
        self.finished = self.clock()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.pop(task, None)

    async def finish(self, grace_s: float | None = None) -> None:
        """Wait for the requests in flight (each ends by its timeout at the latest); those still out after
        `grace_s` are given up and count as failed (`unanswered at stop`)."""
        if not self._in_flight:
            return
        await asyncio.wait(set(self._in_flight), timeout=grace_s)
        left = dict(self._in_flight)
        for task, generated in left.items():
            task.remove_done_callback(self._done)
            task.cancel()
            self.stats.record(Outcome(self.elapsed(), 0, 0.0, generated, reason=UNANSWERED))
        self._in_flight.clear()
        await asyncio.gather(*left, return_exceptions=True)

    async def _request(self, context: int, generated: int) -> None:
        body = {"context_tokens": context, "max_tokens": generated}
        sent = self.clock()
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_s)
        try:
            async with self.session.post(self.cfg.url, json=body, timeout=timeout) as answer:
                payload = await answer.read()
                status = answer.status
        except TimeoutError:
            self._ended(sent, 0, generated, None, None, "timeout")
            return
        except (OSError, aiohttp.ClientError) as exc:
            self._ended(sent, 0, generated, None, None, f"unreachable ({type(exc).__name__})")
            return
        figures = _answer_figures(payload, generated) if status == 200 else (generated, None, None)
        self._ended(sent, status, *figures, "")

    def _ended(
        self,
        sent: float,
        status: int,
        tokens: int,
        ttft: float | None,
        replica_latency: float | None,
        reason: str,
    ) -> None:
        now = self.clock()
        ended = Outcome(now - self.started, status, now - sent, tokens, ttft, reason, replica_latency)
        self.stats.record(ended)
