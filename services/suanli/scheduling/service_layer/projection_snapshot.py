"""Snapshots of the scheduler's projection, so a new leader (or any restarted replica) starts from the
latest one and folds only the events after it instead of every event since position 0.

The state is JSON (`suanli.infra.dataclass_json`: loading it executes no code) in a format named by a
digest of the state's types: after an upgrade that changed them, the old snapshots are not this format,
are ignored, and the first start folds from position 0 once. Fields that hold their default are left
out (most of a job's are): a third less to write and to parse, and the same format, since a missing field
reads as its default whichever version wrote or reads it. Encoding and decoding run in a worker thread:
the job views are immutable, so the loop keeps serving while a large state is written out.
"""

from __future__ import annotations

import asyncio
import logging

from suanli.eventstore import Snapshot, SnapshotStore
from suanli.infra.dataclass_json import StateDecodeError, dumps, loads, shape_digest
from suanli.infra.transient import is_transient
from suanli.scheduling.service_layer.projection import KEEP_ALL, Projection, ProjectionState, Retention

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "scheduler-projection"
SNAPSHOT_FORMAT = f"projection-json-{shape_digest(ProjectionState)}"


def encode_state(state: ProjectionState) -> bytes:
    return dumps(state, omit_defaults=True)


def decode_state(data: bytes) -> ProjectionState:
    return loads(ProjectionState, data)


async def load_projection(snapshots: SnapshotStore, retention: Retention = KEEP_ALL) -> Projection:
    """A projection from the latest snapshot in this format (to be caught up from its position, which
    is the projection's), else an empty one (folded from position 0)."""
    found = await snapshots.latest(SNAPSHOT_NAME, SNAPSHOT_FORMAT)
    if found is None:
        log.info("no projection snapshot in format %s: folding the store from position 0", SNAPSHOT_FORMAT)
        return Projection(retention)
    try:
        state = await asyncio.to_thread(decode_state, found.state)
    except StateDecodeError as exc:
        log.warning("projection snapshot at position %d unreadable (%s): folding from 0", found.position, exc)
        return Projection(retention)
    log.info(
        "projection restored from its snapshot at position %d (%d jobs)", found.position, len(state.jobs)
    )
    return Projection.restored(state, retention)


class Snapshotter:
    """Writes the projection's state when it has moved since the last snapshot, keeping the latest
    ``keep``. Any replica may: a snapshot is the fold of the events up to its position, whoever folded."""

    def __init__(
        self, projection: Projection, snapshots: SnapshotStore, *, keep: int = 3, position: int = 0
    ) -> None:
        self._projection = projection
        self._snapshots = snapshots
        self._keep = keep
        self.position = position  # of the last snapshot written (or loaded)

    async def take(self) -> int | None:
        """Write a snapshot unless the last one covers the projection already; its position, or None."""
        state = self._projection.state()  # one synchronous copy: consistent without any lock
        if state.position <= self.position:
            return None
        data = await asyncio.to_thread(encode_state, state)
        await self._snapshots.save(
            Snapshot(SNAPSHOT_NAME, state.position, SNAPSHOT_FORMAT, data), keep=self._keep
        )
        self.position = state.position
        return state.position

    async def run(self, every_s: float) -> None:
        """Take one every ``every_s`` seconds until cancelled; a database hiccup waits for the next turn."""
        while True:
            await asyncio.sleep(every_s)
            try:
                taken = await self.take()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("projection snapshot failed, next in %.0f s: %r", every_s, exc)
                continue
            if taken is not None:
                log.info("projection snapshot written at position %d", taken)
