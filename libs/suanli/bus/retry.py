"""Exponential backoff between handler attempts (pure: no clock, no sleeping)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_attempts`` counts the first try: 5 means one try and four retries, then the DLQ.

    ``ride_out_s``: a retriable error (a database restarting, the broker away) is tried again past
    ``max_attempts`` until the backoffs waited add up to this long. A valid record must not be
    dead-lettered because a dependency blinked: the scheduler would then miss a task's end and run it
    again. Non-retriable errors never wait for it.
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    multiplier: float = 2.0
    max_backoff_s: float = 10.0
    ride_out_s: float = 0.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be >= 0 and the multiplier >= 1")
        if self.ride_out_s < 0 or (
            self.ride_out_s > 0 and min(self.initial_backoff_s, self.max_backoff_s) <= 0
        ):
            raise ValueError("ride_out_s must be >= 0, and needs positive backoffs to ever end")

    def backoff_s(self, failed_attempts: int) -> float:
        """Wait before the next try, after ``failed_attempts`` failures (1 for the first)."""
        if failed_attempts < 1:
            return 0.0
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (failed_attempts - 1))

    def waited_s(self, failed_attempts: int) -> float:
        """The backoffs waited before the try that made ``failed_attempts`` failures."""
        return sum(self.backoff_s(n) for n in range(1, failed_attempts))

    def should_retry(self, failed_attempts: int, retriable: bool) -> bool:
        """Whether to try a record again after ``failed_attempts`` failures of the given kind."""
        if not retriable:
            return False
        return failed_attempts < self.max_attempts or self.waited_s(failed_attempts) < self.ride_out_s


# What the services consume with: a few quick tries, then up to two minutes of capped backoff while a
# dependency comes back. Two minutes covers a PostgreSQL restart or failover and stays well inside the
# consumer's max poll interval (5 min), so the group does not evict a member that is waiting it out.
SERVICE_RETRY = RetryPolicy(ride_out_s=120.0)
