"""Table states kept decoded, so a state's JSON is parsed only when the table holds bytes this worker has
not decoded or written itself (after a recovery, or once the memo let it go).

Every snapshot, placement and task fact reads a state and writes the next one; parsing it from JSON each
time was a fifth of the worker's CPU under bench/latency.py. States are frozen dataclasses, so sharing the
decoded object is safe. A hit needs the table to hold the very bytes object remembered with it, so a value
the table got from anywhere else (its changelog, another write) is decoded again.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from suanli.metering.adapters.effects import Effects, Table
from suanli.metering.adapters.jsoncodec import dumps, loads

T = TypeVar("T")


class DecodedStates:
    """The decoded states of every table, remembered with the bytes they were decoded from or written as."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._memo: dict[tuple[str, bytes], tuple[bytes, Any]] = {}

    def read(self, out: Effects, table: Table, key: bytes, cls: type[T]) -> T | None:
        raw = out.get(table, key)
        if raw is None:
            return None
        slot = (table.name, key)
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is raw:
            return cast(T, hit[1])
        value = loads(cls, raw)
        self._keep(slot, raw, value)
        return value

    def write(self, out: Effects, table: Table, key: bytes, value: Any) -> None:
        raw = dumps(value)
        out.put(table, key, raw)
        self._keep((table.name, key), raw, value)

    def delete(self, out: Effects, table: Table, key: bytes) -> None:
        out.delete(table, key)
        self._memo.pop((table.name, key), None)

    def _keep(self, slot: tuple[str, bytes], raw: bytes, value: Any) -> None:
        if slot not in self._memo and len(self._memo) >= self._limit:
            del self._memo[next(iter(self._memo))]  # the longest remembered goes first
        self._memo[slot] = (raw, value)
