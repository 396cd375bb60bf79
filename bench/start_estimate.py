"""What a queue's position and start estimate costs (issue 15, `squeue --start`): one replay of a deep
queue over a fleet, as GetJob / ListJobs run it (`domain.queueing.start_estimate.estimate_starts`).

    .venv/bin/python bench/start_estimate.py [--waiting 1000] [--nodes 200] [--running 1600] [--repeat 5]

``--nodes`` nodes of 8 GPUs; ``--running`` one-GPU tasks held on random nodes, ending within the hour;
``--waiting`` jobs of 1, 2 or 4 tasks of 1, 2, 4 or 8 GPUs each, 10 minutes long, all able to run on
every node (a seeded draw). Printed: the median and worst wall time of ``--repeat`` replays and how many
jobs got an estimate. The scheduler replays a queue at most once per second and projection change.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from suanli.scheduling.domain.queueing.start_estimate import (
    Held,
    Room,
    TaskDemand,
    Waiting,
    estimate_starts,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--running", type=int, default=1600)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    nodes = {f"n{i:04d}": Room(64_000, 256_000, 8_000) for i in range(args.nodes)}
    ids = tuple(sorted(nodes))
    held = [
        Held(rng.choice(ids), Room(1000, 1000, 1000), NOW + timedelta(seconds=rng.randrange(10, 3600)))
        for _ in range(args.running)
    ]
    queue = [
        Waiting(
            f"j{i}",
            0,
            i,
            tuple(
                TaskDemand(Room(1000, 1000, 1000 * rng.choice((1, 2, 4, 8))), ids)
                for _ in range(rng.choice((1, 1, 2, 4)))
            ),
            600.0,
        )
        for i in range(args.waiting)
    ]
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        out = estimate_starts(queue, nodes, held, NOW)
        times.append(time.perf_counter() - started)
    estimated = sum(1 for e in out.values() if e.start_at is not None)
    print(
        f"{args.waiting} waiting, {args.nodes} nodes, {args.running} running: "
        f"median {statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms; "
        f"{estimated} estimated"
    )


if __name__ == "__main__":
    main()
