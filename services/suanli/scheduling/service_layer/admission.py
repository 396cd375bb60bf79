"""What the API admits before a request reaches the job commands: per-tenant submit rate and pending
jobs, and how many WatchJob streams one instance serves at once.

The tenant is the first segment of the queue name (`AcceptedSpec.tenant`). A refusal is
`ResourceExhausted` with the seconds after which a retry may pass, which the gRPC edge sends as
trailing metadata (`suanli.rpc.RETRY_AFTER_MS`, and ``grpc-retry-pushback-ms`` for clients with a
retry policy) and in the message. Limits of 0 are off. Per instance: two schedulers in a leader/standby
pair each count their own callers (writes reach only the leader anyway).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from suanli.errors import ResourceExhausted


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    max_pending_jobs: int = 1000  # per tenant: submitted jobs still PENDING (not all tasks placed)
    submit_rate: float = 50.0  # per tenant: submits per second, sustained
    submit_burst: int = 100  # per tenant: submits at once after a quiet spell
    max_watch_streams: int = 1000  # per instance: WatchJob streams open at once
    retry_after_s: float = 5.0  # advice when a count (pending jobs, streams) is full: no exact time


class TooManyRequests(ResourceExhausted):
    """A limit was reached; ``retry_after_s`` says when trying again may pass."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(f"{message}; retry in {retry_after_s:.1f}s")


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Admission:
    """Token buckets per tenant and a count of open watch streams; time from ``monotonic``."""

    def __init__(self, limits: AdmissionLimits, monotonic: Callable[[], float]) -> None:
        self.limits = limits
        self._monotonic = monotonic
        self._buckets: dict[str, _Bucket] = {}
        self.watch_streams = 0

    def admit_submit(self, tenant: str, pending: int) -> None:
        """Admit one submit of ``tenant``, which has ``pending`` jobs pending now, or raise."""
        limits = self.limits
        if limits.max_pending_jobs and pending >= limits.max_pending_jobs:
            raise TooManyRequests(
                f"tenant {tenant!r} has {pending} pending jobs, at most {limits.max_pending_jobs}",
                limits.retry_after_s,
            )
        if not limits.submit_rate:
            return
        now = self._monotonic()
        burst = max(1.0, float(limits.submit_burst))
        bucket = self._buckets.setdefault(tenant, _Bucket(burst, now))
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * limits.submit_rate)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / limits.submit_rate
            raise TooManyRequests(
                f"tenant {tenant!r} submits faster than {limits.submit_rate:g}/s (burst {burst:g})",
                math.ceil(wait * 10) / 10,
            )
        bucket.tokens -= 1.0

    def open_watch(self) -> None:
        """Count one more WatchJob stream, or raise when the instance serves its maximum."""
        cap = self.limits.max_watch_streams
        if cap and self.watch_streams >= cap:
            raise TooManyRequests(
                f"{self.watch_streams} WatchJob streams open on this instance, at most {cap}",
                self.limits.retry_after_s,
            )
        self.watch_streams += 1

    def close_watch(self) -> None:
        """A stream `open_watch` counted has ended."""
        self.watch_streams = max(0, self.watch_streams - 1)
