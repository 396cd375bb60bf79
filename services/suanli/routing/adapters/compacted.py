"""Reading a compacted view topic whole: every partition from the beginning, no consumer group.

Each API instance keeps the whole view (network.links, capacity.nodes), so it assigns itself every
partition instead of joining a group; a restarted instance reads the topic again and has the view
back. ``caught_up`` is set once the positions reach the end offsets seen at start (the view is then as
complete as the topic was), after which the reader keeps following new records.

After the broker started over, `rewind` reads the topic from the beginning again (the API calls it when
its watch says so).

A record that does not decode is logged and counted, not dead-lettered: every instance reads every
record, so dead-lettering here would copy it once per instance; the topic's producer is where bad
records are caught.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from suanli.bus.security import client_options
from suanli.contracts import EventDecodeError, decode

log = logging.getLogger(__name__)

Apply = Callable[[str, dict[str, Any]], None]


class CompactedReader:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        apply: Apply,
        *,
        fetch_wait_ms: int = 100,
        on_undecodable: Callable[[str], None] | None = None,
    ) -> None:
        self.topic = topic
        self._apply = apply
        self._on_undecodable = on_undecodable or (lambda _topic: None)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=fetch_wait_ms,
            **client_options(),
        )
        self.caught_up = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        partitions = await self._partitions()
        self._consumer.assign(partitions)
        await self._consumer.seek_to_beginning(*partitions)
        ends = await self._consumer.end_offsets(partitions)
        self._task = asyncio.create_task(self._run(ends), name=f"read {self.topic}")

    async def _partitions(self) -> list[TopicPartition]:
        # The topic exists before the API starts (ensure_topics); metadata may lag a fresh topic.
        for _ in range(50):
            await self._consumer.topics()
            found = self._consumer.partitions_for_topic(self.topic)
            if found:
                return [TopicPartition(self.topic, p) for p in sorted(found)]
            await asyncio.sleep(0.1)
        raise RuntimeError(f"topic {self.topic} has no partitions")

    async def rewind(self) -> None:
        """Read the topic from its beginning again: after the broker started over, the positions held
        name the old log, past the new one's end, and every record written there would be skipped."""
        partitions = list(self._consumer.assignment())
        if partitions:
            await self._consumer.seek_to_beginning(*partitions)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()

    async def _run(self, ends: dict[TopicPartition, int]) -> None:
        pending = {tp: end for tp, end in ends.items() if end > 0}
        if not pending:
            self.caught_up.set()
        while True:
            batches = await self._consumer.getmany(timeout_ms=500)
            for tp, messages in batches.items():
                for m in messages:
                    self._handle(m.value)
                if tp in pending and messages and messages[-1].offset + 1 >= pending[tp]:
                    del pending[tp]
            if not self.caught_up.is_set() and not pending:
                self.caught_up.set()

    def _handle(self, value: bytes | None) -> None:
        if value is None:
            return  # a tombstone: nothing to keep
        try:
            name, record = decode(value)
        except EventDecodeError as exc:
            log.warning("undecodable record on %s: %s", self.topic, exc)
            self._on_undecodable(self.topic)
            return
        self._apply(name, record)
