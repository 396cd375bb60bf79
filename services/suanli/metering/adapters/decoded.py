"""Table states kept decoded, so a state's JSON is parsed only when the table holds bytes this worker has
not decoded or written itself (after a recovery, or once the memo let it go).

Every snapshot, placement and task fact reads a state and writes the next one; parsing it from JSON each
time was a fifth of the worker's CPU under bench/latency.py. States are frozen dataclasses, so sharing the
decoded object is safe. A hit needs the table to hold the very bytes object remembered with it, so a value
the table got from anywhere else (its changelog, another write) is decoded again.

A write that is not lasting (`ports.States.put`) is neither encoded nor written: the state is *held*
here, newer than the table's bytes, until the key's next lasting write or until `Checkpoints` says the
key is due for its changelog again. Under the 100-node fleet's snapshots every second, encoding and
logging each node's new stamps was about a third of the worker's CPU and two of every three records it
produced with usage samples flowing (faust sends each changelog record as its own produce request on
Tansu). A restart recovers the table's bytes: older in those fields only, which the next input sets again.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from suanli.clock import MillisClock, system_ms
from suanli.metering.adapters.effects import Effects, Table
from suanli.metering.adapters.jsoncodec import dumps, loads

T = TypeVar("T")


class Checkpoints:
    """When each key's value last reached its table's changelog; a key is due again after ``interval_ms``.

    In memory: after a restart every key is due at its first write. A wall clock that jumps only moves
    when states are logged, never what they hold.
    """

    def __init__(self, interval_ms: int, clock: MillisClock = system_ms) -> None:
        self._interval_ms = interval_ms
        self._clock = clock
        self._logged: dict[tuple[str, bytes], int] = {}

    def due(self, slot: tuple[str, bytes]) -> bool:
        logged = self._logged.get(slot)
        return logged is None or self._clock() - logged >= self._interval_ms

    def logged(self, slot: tuple[str, bytes]) -> None:
        if self._interval_ms > 0:  # with none, every key is always due: nothing to remember
            self._logged[slot] = self._clock()

    def forget(self, slot: tuple[str, bytes]) -> None:
        self._logged.pop(slot, None)


class DecodedStates:
    """The decoded states of every table, remembered with the bytes they were decoded from or written as.

    ``checkpoints``: when a passing state is due for its changelog (default: always, every write lasts).
    """

    def __init__(self, limit: int = 100_000, checkpoints: Checkpoints | None = None) -> None:
        self._limit = limit
        self._memo: dict[tuple[str, bytes], tuple[bytes, Any]] = {}
        self._checkpoints = checkpoints or Checkpoints(0)
        # States newer than their table's bytes, by slot, with those bytes: never evicted, dropped at the
        # key's next write, and ignored once the table holds other bytes (recovered after a rebalance).
        self._held: dict[tuple[str, bytes], tuple[bytes, Any]] = {}

    def read(self, out: Effects, table: Table, key: bytes, cls: type[T]) -> T | None:
        slot = (table.name, key)
        staged = out.staged.get(slot)
        if staged is not None:
            return cast(T, staged[1])
        raw = out.get(table, key)
        if not out.pending(table, key):
            held = self._held.get(slot)
            if held is not None and held[0] is raw:
                return cast(T, held[1])
        if raw is None:
            return None
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is raw:
            return cast(T, hit[1])
        value = loads(cls, raw)
        self._keep(slot, raw, value)
        return value

    def write(self, out: Effects, table: Table, key: bytes, value: Any, *, lasting: bool = True) -> None:
        slot = (table.name, key)
        # A value already written in this batch may carry a lasting change: its successor is written too.
        if not (lasting or out.pending(table, key) or self._checkpoints.due(slot)):
            out.stage(table, key, value)
            return
        raw = dumps(value)
        out.put(table, key, raw)
        self._keep(slot, raw, value)

    def delete(self, out: Effects, table: Table, key: bytes) -> None:
        out.delete(table, key)
        self._memo.pop((table.name, key), None)

    def committed(self, out: Effects) -> None:
        """``out`` was committed: the keys it wrote were logged, the states it staged are held."""
        for slot, deleted in out.written():
            self._held.pop(slot, None)
            if deleted:
                self._checkpoints.forget(slot)
            else:
                self._checkpoints.logged(slot)
        for slot, (table, state) in out.staged.items():
            raw = table.get(slot[1])
            if raw is not None:
                self._held[slot] = (raw, state)

    def _keep(self, slot: tuple[str, bytes], raw: bytes, value: Any) -> None:
        if slot not in self._memo and len(self._memo) >= self._limit:
            del self._memo[next(iter(self._memo))]  # the longest remembered goes first
        self._memo[slot] = (raw, value)
