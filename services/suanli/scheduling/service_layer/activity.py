"""A summary of frequent work at INFO, one line per period: the log says what the scheduler does without a
line per task report (which, under a burst, would make logging the new bottleneck)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger("suanli.scheduling.activity")

DEFAULT_PERIOD_S = 10.0


class Activity:
    def __init__(
        self, period_s: float = DEFAULT_PERIOD_S, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._period_s = period_s
        self._monotonic = monotonic
        self._since = monotonic()
        self._counts: Counter[str] = Counter()

    def count(self, what: str, n: int = 1) -> None:
        """Count ``n`` of ``what``; once a period has passed, log the period's counts and start anew."""
        if n:
            self._counts[what] += n
        now = self._monotonic()
        if now - self._since < self._period_s:
            return
        if self._counts:
            parts = ", ".join(f"{k} {v}" for k, v in sorted(self._counts.items()))
            log.info("last %.0f s: %s", now - self._since, parts)
        self._counts.clear()
        self._since = now
