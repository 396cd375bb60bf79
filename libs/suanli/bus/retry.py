"""Exponential backoff between handler attempts (pure: no clock, no sleeping)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_attempts`` counts the first try: 5 means one try and four retries, then the DLQ."""

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    multiplier: float = 2.0
    max_backoff_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be >= 0 and the multiplier >= 1")

    def backoff_s(self, failed_attempts: int) -> float:
        """Wait before the next try, after ``failed_attempts`` failures (1 for the first)."""
        if failed_attempts < 1:
            return 0.0
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (failed_attempts - 1))

    def should_retry(self, failed_attempts: int, retriable: bool) -> bool:
        """Whether to try a record again after ``failed_attempts`` failures of the given kind."""
        return retriable and failed_attempts < self.max_attempts
