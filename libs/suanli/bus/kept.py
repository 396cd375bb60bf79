"""`KeptConsumer`: one `EventConsumer` a service keeps running for as long as it runs.

- A consumer whose run fails (the broker away too long, a client error) is replaced after a pause; a
  service whose consumer simply died would serve on without its input.
- With a `BrokerWatch`, the broker is looked at every ``check_s``: when it started over (the embedded
  broker restarted empty), the consumer is replaced at once by one built ``from_start``. The old one may
  be fetching from its position past the end of the recreated topics, or have committed that position
  into the new broker (which accepts it), and would skip everything written there.
- Stopping lets the record in hand finish and its offset be committed, and waits for a group join in
  progress to end first (a consumer cancelled in the middle of its join leaves its client open).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Self

from suanli.bus.consumer import EventConsumer, Handler
from suanli.bus.watch import BrokerWatch

log = logging.getLogger(__name__)

# Seconds between looks at the broker: a restart is noticed within this, and each look is one admin
# round trip (topics ensured, cluster described).
DEFAULT_CHECK_S = 5.0


class KeptConsumer:
    """Keeps one consumer from ``new_consumer(from_start)`` running until stopped (see the module)."""

    def __init__(
        self,
        new_consumer: Callable[[bool], EventConsumer],
        *,
        pause_s: float = 1.0,
        watch: BrokerWatch | None = None,
        check_s: float = DEFAULT_CHECK_S,
        name: str = "consumer",
    ) -> None:
        self._new_consumer = new_consumer
        self._pause_s = pause_s
        self._watch = watch
        self._check_s = check_s
        self._name = name
        self._consumer: EventConsumer | None = None
        self._running = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rebuilds = 0  # consumers replaced because the broker started over

    @classmethod
    def of(
        cls,
        bootstrap: str,
        group_id: str,
        topics: Iterable[str],
        handler: Handler,
        *,
        watch: BrokerWatch | None,
        name: str,
        **options: Any,
    ) -> KeptConsumer:
        """Keeps ``EventConsumer(bootstrap, group_id, topics, handler, **options)`` running."""
        names = tuple(topics)

        def new_consumer(from_start: bool) -> EventConsumer:
            return EventConsumer(bootstrap, group_id, names, handler, from_start=from_start, **options)

        return cls(new_consumer, watch=watch, name=name)

    async def wait_assigned(self, timeout_s: float = 30.0) -> None:
        """Wait until the consumer running holds at least one partition (its group join is done)."""

        async def assigned() -> None:
            while True:
                consumer = self._consumer
                if consumer is not None:
                    with contextlib.suppress(TimeoutError):
                        await consumer.wait_assigned(timeout_s=0.5)
                        return
                else:
                    await asyncio.sleep(0.05)

        await asyncio.wait_for(assigned(), timeout_s)

    async def run(self, stop: asyncio.Event) -> None:
        """Keep a consumer running until ``stop`` is set; then return (`stop()` ends the one running)."""
        from_start = False  # until a consumer built after a start-over has read from the beginning
        while not stop.is_set():
            consumer = self._new_consumer(from_start)
            self._consumer = consumer
            watching = asyncio.create_task(self._watch_broker(consumer), name=f"{self._name}-broker-watch")
            try:
                await consumer.start()
                self._running.set()
                await consumer.run()
            except Exception:
                log.exception("%s failed; starting a new one", self._name)
            finally:
                self._running.clear()
                watching.cancel()
                with contextlib.suppress(Exception):
                    await consumer.stop()
            from_start = from_start and consumer.rewind_pending
            started_over = False
            with contextlib.suppress(asyncio.CancelledError):
                started_over = await watching
            if started_over:
                from_start = True
                continue  # what the new broker holds is waiting
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._pause_s)

    async def _watch_broker(self, consumer: EventConsumer) -> bool:
        """Ends the consumer's run when the broker started over (True); until then looks every check."""
        if self._watch is None:
            return False
        while True:
            await asyncio.sleep(self._check_s)
            try:
                started_over = await self._watch.look()
            except Exception as exc:  # the broker is away: the consumer's own retries cover it
                log.warning("%s: cannot look at the broker: %r", self._name, exc)
                continue
            if started_over:
                log.warning("the broker started over: replacing the %s", self._name)
                self.rebuilds += 1
                consumer.request_stop()
                return True

    async def stop(self, task: asyncio.Task[None], join_timeout_s: float = 15.0) -> None:
        """End ``task`` (running `run`), whose ``stop`` event the caller has set."""
        if not task.done() and not self._running.is_set():
            joined = asyncio.create_task(self._running.wait())
            await asyncio.wait({task, joined}, timeout=join_timeout_s, return_when=asyncio.FIRST_COMPLETED)
            joined.cancel()
        consumer = self._consumer
        if consumer is not None and self._running.is_set():
            consumer.request_stop()  # let the record in hand finish and its offset be committed
        else:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()

    async def __aenter__(self) -> Self:
        self._stop.clear()
        self._task = asyncio.create_task(self.run(self._stop), name=self._name)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            await self.stop(task)
