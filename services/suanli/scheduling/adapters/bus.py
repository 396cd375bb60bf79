"""Consumers that survive the broker: each runs in a loop that rebuilds it after any failure, and a
watchdog re-ensures the topics; when some were missing (a Tansu restart loses every topic and offset),
the consumers are rebuilt so they read the new topics from the start instead of skipping silently."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from suanli.bus import (
    ConsumerSettings,
    DeadLetterHook,
    EventConsumer,
    Handler,
    TopicSpec,
    ensure_topics,
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
        self._topics = tuple(topics)
        self._check_s = check_s
        self._backoff_s = backoff_s
        self._settings = settings or ConsumerSettings(client_id="suanli-scheduling")
        self.consumers: list[EventConsumer] = []
        self.rebuilds = 0
        self._cluster_id: str | None = None

    async def run(self) -> None:
        while True:
            await self._ensure()
            tasks = [asyncio.create_task(self._keep(spec)) for spec in self._specs]
            try:
                while True:
                    await asyncio.sleep(self._check_s)
                    if await self._ensure():
                        log.warning("the broker started over: rebuilding consumers")
                        self.rebuilds += 1
                        break
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    async def _ensure(self) -> bool:
        """Create missing topics; True when the broker started over since the last look: a topic was
        missing, or another cluster answers (someone else may have created the topics first: a standby's
        watchdog, another service). Broker errors: retry until it answers."""
        while True:
            try:
                result = await ensure_topics(self._bootstrap, self._topics, prefix=self._prefix)
                break
            except Exception as exc:  # the broker is away: keep trying, consumers keep their own loops
                log.warning("cannot ensure topics: %r", exc)
                await asyncio.sleep(self._backoff_s)
        before, self._cluster_id = self._cluster_id, result.cluster_id or self._cluster_id
        return bool(result.created) or (before is not None and before != self._cluster_id)

    async def _keep(self, spec: ConsumerSpec) -> None:
        topics = [topic_name(t, self._prefix) for t in spec.topics]
        while True:
            consumer = EventConsumer(
                self._bootstrap,
                spec.group_id,
                topics,
                spec.handler,
                settings=self._settings,
                on_dead_letter=spec.on_dead_letter,
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
            await asyncio.sleep(self._backoff_s)

    @staticmethod
    async def _notify_assigned(consumer: EventConsumer, callback: Callable[[], None]) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await consumer.wait_assigned(timeout_s=60.0)
                callback()
                return
