"""The shape of a record read from Kafka, as the bus's pure code sees it (no aiokafka import)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class ConsumedRecord(Protocol):
    """Where a record came from and what it held (aiokafka's ``ConsumerRecord`` has this shape)."""

    @property
    def topic(self) -> str: ...  # noqa: D102
    @property
    def partition(self) -> int: ...  # noqa: D102
    @property
    def offset(self) -> int: ...  # noqa: D102
    @property
    def key(self) -> bytes | None: ...  # noqa: D102
    @property
    def value(self) -> bytes | None: ...  # noqa: D102
    @property
    def headers(self) -> Iterable[tuple[str, bytes]] | None: ...  # noqa: D102


class StoredRecord(ConsumedRecord, Protocol):
    """A consumed record with the broker's timestamp (ms since the epoch)."""

    @property
    def timestamp(self) -> int: ...  # noqa: D102
