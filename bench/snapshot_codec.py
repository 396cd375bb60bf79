"""What encoding and decoding a takeover-sized projection snapshot costs, without PostgreSQL.

    .venv/bin/python bench/snapshot_codec.py [--recent 10000] [--active 1000] [--runs 5]

The state is the one `bench/takeover.py` snapshots, built with its builders in memory: the template job
run through the real service layer (on `InMemoryEventStore`), ``--active`` jobs submitted that stay
PENDING, then ``--recent`` copies of the template's five events (its `copies`: own ids, ``seq`` and
times, finished in the last hour) folded by the projection, under the default retention. Each of
``--runs`` runs encodes it (`encode_state`, what `Snapshotter` writes) and decodes the bytes
(`decode_state`, what a starting scheduler reads); the best and median of each, wall and CPU time, are
printed, after checking the decoded state equals the original. The collector runs with CPython's
default thresholds, as in `bench/takeover.py`'s starting process. To compare two trees, run it from each.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from takeover import TENANT, _service, _spec, copies, run_template

from suanli.clock import ManualClock
from suanli.eventstore import InMemoryEventStore, StoredEvent
from suanli.scheduling.adapters.pending import InMemoryPendingReasons
from suanli.scheduling.adapters.store import StoreWriter, Unfenced
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.scheduling.service_layer.commands import SubmitJob
from suanli.scheduling.service_layer.projection import ProjectionState, job_stream
from suanli.scheduling.service_layer.projection_snapshot import decode_state, encode_state


async def build_state(recent: int, active: int) -> ProjectionState:
    """The projection state `bench/takeover.py` snapshots (its recent and active jobs), in memory."""
    now = datetime.now(UTC).replace(microsecond=0)
    clock = ManualClock(now - timedelta(days=1))
    store = InMemoryEventStore(clock=clock)
    settings = SchedulingSettings.load({}, dsn="postgresql://unused", bootstrap="127.0.0.1:9")
    writer = StoreWriter(store, InMemoryPendingReasons(), Unfenced())
    scheduler, projection = _service(writer, clock, settings.retention())
    await writer.setup()
    template_id = await run_template(scheduler, projection, clock)
    template = list(await store.read(job_stream(template_id)))
    clock.set(now)
    for n in range(active):
        await scheduler.commands.handle(SubmitJob(_spec(f"bench-active-{n}")))
    # The copies go straight to the projection, after every event the store holds.
    position = projection.position
    start, step = now - timedelta(minutes=50), timedelta(minutes=45) / max(recent, 1)
    for stream, version, event_id, name, payload, metadata, recorded_at in copies(
        template, 0, recent, start, step
    ):
        position += 1
        projection.apply(
            StoredEvent(stream, version, position, event_id, name, payload, recorded_at, json.loads(metadata))
        )
    return projection.state()


def timed(runs: int, work: Callable[[], Any]) -> tuple[Any, list[float], list[float]]:
    """``work``'s last result and each run's wall and CPU seconds."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, walls, cpus


def _figures(name: str, walls: list[float], cpus: list[float]) -> str:
    return (
        f"{name}: best {min(walls):.3f} s, median {statistics.median(walls):.3f} s "
        f"(CPU best {min(cpus):.3f} s, median {statistics.median(cpus):.3f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recent", type=int, default=10_000)
    parser.add_argument("--active", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{platform.machine()}, Python {platform.python_version()}, tenant {TENANT}")
    began = time.perf_counter()
    state = asyncio.run(build_state(args.recent, args.active))
    print(f"state: {len(state.jobs):,} jobs, built in {time.perf_counter() - began:.1f} s", flush=True)
    # What built the state (the store, the projection) is out of the collector's reach from now on, as
    # in a starting scheduler: the runs' collections walk what they allocate, not the builder's heap.
    gc.collect()
    gc.freeze()
    data, enc_walls, enc_cpus = timed(args.runs, lambda: encode_state(state))
    decoded, dec_walls, dec_cpus = timed(args.runs, lambda: decode_state(data))
    if decoded != state:
        raise AssertionError("the decoded state differs from the encoded one")
    print(f"snapshot: {len(data):,} bytes")
    print(_figures("encode", enc_walls, enc_cpus))
    print(_figures("decode", dec_walls, dec_cpus))


if __name__ == "__main__":
    main()
