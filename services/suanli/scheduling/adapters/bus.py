"""Consumers that survive the broker: each runs in a loop that rebuilds it after any failure, and a
watchdog re-ensures the topics; when the broker started over (a Tansu restart loses every topic and
offset: `suanli.bus.watch`), the consumers are rebuilt to read the new topics from the start instead of
skipping silently from old positions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from suanli.bus import (
    BrokerWatch,
    ConsumerSettings,
    DeadLetterHook,
    EventConsumer,
    Handler,
    TopicSpec,
    topic_name,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    group_id: str
    topics: tuple[str, ...]  # logical names (unprefixed)
    handler: Handler
    # Called each time a (re)built consumer gets its partitions, i.e. when records start flowing again.
    on_assigned: Callable[[], None] | None = None
    # Awaited after each record this consumer dead-letters (the command topic answers its sender).
    on_dead_letter: DeadLetterHook | None = None


class SupervisedConsumers:
    def __init__(
        self,
        bootstrap: str,
        prefix: str | None,
        specs: Sequence[ConsumerSpec],
        topics: Sequence[TopicSpec],
        *,
        check_s: float = 5.0,
        backoff_s: float = 1.0,
        settings: ConsumerSettings | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._prefix = prefix
        self._specs = tuple(specs)
        self._watch = BrokerWatch(bootstrap, topics, prefix=prefix)
        self._check_s = check_s
        self._backoff_s = backoff_s
        self._settings = settings or ConsumerSettings(client_id="suanli-scheduling")
        self.consumers: list[EventConsumer] = []
        self.rebuilds = 0

    async def run(self) -> None:
        started_over = False
        while True:
            await self._ensure()
            tasks = [asyncio.create_task(self._keep(spec, started_over)) for spec in self._specs]
            try:
                while True:
                    await asyncio.sleep(self._check_s)
                    if await self._ensure():
                        log.warning("the broker started over: rebuilding consumers")
                        self.rebuilds += 1
                        started_over = True
                        break
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    async def _ensure(self) -> bool:
        """Create missing topics; True when the broker started over since the last look (`BrokerWatch`).
        Broker errors: retry until it answers, the consumers keep their own loops meanwhile."""
        while True:
            try:
                return await self._watch.look()
            except Exception as exc:
                log.warning("cannot ensure topics: %r", exc)
                await asyncio.sleep(self._backoff_s)

    async def _keep(self, spec: ConsumerSpec, from_start: bool) -> None:
        """Keep one consumer of ``spec`` running; ``from_start`` (after a start-over) until one has read
        its partitions from the beginning: the group's committed offsets may name the old logs."""
        topics = [topic_name(t, self._prefix) for t in spec.topics]
        while True:
            consumer = EventConsumer(
                self._bootstrap,
                spec.group_id,
                topics,
                spec.handler,
                settings=self._settings,
                on_dead_letter=spec.on_dead_letter,
                from_start=from_start,
            )
            notify: asyncio.Task[None] | None = None
            try:
                await consumer.start()
                self.consumers.append(consumer)
                if spec.on_assigned is not None:
                    notify = asyncio.create_task(self._notify_assigned(consumer, spec.on_assigned))
                await consumer.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("consumer %s failed, rebuilding: %r", spec.group_id, exc)
            finally:
                if notify is not None:
                    notify.cancel()
                if consumer in self.consumers:
                    self.consumers.remove(consumer)
                with contextlib.suppress(Exception):
                    await asyncio.shield(consumer.stop())
                from_start = from_start and consumer.rewind_pending
            await asyncio.sleep(self._backoff_s)

    @staticmethod
    async def _notify_assigned(consumer: EventConsumer, callback: Callable[[], None]) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await consumer.wait_assigned(timeout_s=60.0)
                callback()
                return
