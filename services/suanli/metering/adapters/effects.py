"""What handling records produces, held back until it can be made durable in the worker's order.

Handlers do not publish or write themselves: they add records to send and table values to write to an
`Effects`. `commit` then sends every record, awaits every acknowledgement, and only then writes the tables:
outputs acknowledged before the state that records them, paid once per batch instead of once per output.
Sends keep the order they were added in, so records of one key reach their partition in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol


class Topic(Protocol):
    """What Effects needs of a faust topic: a send that hands back the acknowledgement to await."""

    async def send(
        self, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> Awaitable[object]: ...


class Table(Protocol):
    """What Effects needs of a faust table (raw bytes keys and values)."""

    @property
    def name(self) -> str: ...

    def get(self, key: bytes) -> bytes | None: ...

    def __setitem__(self, key: bytes, value: bytes) -> None: ...

    def pop(self, key: bytes, default: None, /) -> bytes | None:
        """Remove the key (a faust table writes a tombstone to its changelog)."""
        ...


@dataclass(frozen=True, slots=True)
class Send:
    topic: Topic
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] | None = None


class Effects:
    """Records to send and table values to write. Reads see the values written here first, so the second
    record of a key in a batch builds on the state the first one left."""

    def __init__(self, prepare: Callable[[list[Table]], Awaitable[None]] | None = None) -> None:
        # Awaited with the tables about to be written, after the sends: what a table's changelog needs
        # before a write can be handed to it (see `changelog.ChangelogTopics`).
        self._prepare = prepare
        self.sends: list[Send] = []
        # Only the last value of a key is written: the changelog needs no intermediate states. None: the
        # key is deleted.
        self._writes: dict[tuple[str, bytes], tuple[Table, bytes | None]] = {}
        # States for the worker's memory only, not encoded, by (table name, key): see `DecodedStates`.
        self.staged: dict[tuple[str, bytes], tuple[Table, object]] = {}

    def written(self) -> Iterable[tuple[tuple[str, bytes], bool]]:
        """The (table name, key) of every value written, with whether it was a delete."""
        return ((slot, value is None) for slot, (_, value) in self._writes.items())

    def pending(self, table: Table, key: bytes) -> bool:
        """Whether a value of the key is to be written (or deleted) by this batch."""
        return (table.name, key) in self._writes

    def stage(self, table: Table, key: bytes, state: object) -> None:
        """A state for the worker's memory only; a later write of the key in the batch replaces it."""
        self.staged[(table.name, key)] = (table, state)

    def get(self, table: Table, key: bytes) -> bytes | None:
        pending = self._writes.get((table.name, key))
        return pending[1] if pending is not None else table.get(key)

    def put(self, table: Table, key: bytes, value: bytes) -> None:
        self._writes[(table.name, key)] = (table, value)
        self.staged.pop((table.name, key), None)

    def delete(self, table: Table, key: bytes) -> None:
        self._writes[(table.name, key)] = (table, None)
        self.staged.pop((table.name, key), None)

    def send(
        self, topic: Topic, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        self.sends.append(Send(topic, key, value, headers))

    async def commit(self) -> None:
        """Send everything, await every acknowledgement, then write the tables."""
        pending = [await s.topic.send(key=s.key, value=s.value, headers=s.headers) for s in self.sends]
        if pending:
            await asyncio.gather(*pending)
        if self._prepare is not None and self._writes:
            await self._prepare(list({id(t): t for t, _ in self._writes.values()}.values()))
        for (_, key), (table, value) in self._writes.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
