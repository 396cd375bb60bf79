"""The live autoscaler's tick on PostgreSQL: how long one decision round over N autoscaled services takes.

Creates `--services` KPA services (2 replicas each, in a fresh schema), feeds the load view two reports
per service and times `AutoscalerController.tick()` while holding the autoscaler lease: `--ticks` rounds
that hold the count (each keeps one decision row per service), then one burst round that scales every
service up (one ServiceScaled, its replica orders and decision row per service). No broker: the outbox
is written, not published. The tick must stay well under the 2 s interval.

    .venv/bin/python bench/autoscaler_tick.py [--services 200] [--ticks 10] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from suanli.clock import ManualClock
from suanli.contracts.load import LoadView
from suanli.infra.postgres import resolve_postgres
from suanli.serving.adapters.lease import AutoscalerLease
from suanli.serving.bootstrap import bootstrap
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.autoscaler import AutoscalerController
from suanli.serving.testing import replica_report

TICK_S = 2.0


def _spec(name: str) -> dict[str, object]:
    return {
        "name": name,
        "model": "llama-2-7b",
        "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"]},
        "min_replicas": 2,
        "max_replicas": 8,
        "target": {"concurrency": 8},
        "autoscaling": {"policy": "kpa"},
    }


async def run(dsn: str, services: int, ticks: int) -> tuple[list[float], float]:
    settings = ServingSettings.load(
        {}, kafka_bootstrap="unused:9092", pg_dsn=dsn, db_schema=f"bench_{secrets.token_hex(4)}"
    )
    clock = ManualClock(datetime(2026, 12, 2, tzinfo=UTC))
    async with bootstrap(settings, clock) as serving:
        ids = []
        for i in range(services):
            async with serving.uow.begin() as unit:
                created = await serving.service.create(unit, "bench", _spec(f"svc-{i}"), 0, "bench")
            ids.append(created.service_id)
        lease = AutoscalerLease(dsn, serving.store.schema, lease_s=30.0)
        loads = LoadView()
        controller = AutoscalerController(
            serving.service,
            serving.uow.fenced(lease.check),
            serving.queries,
            loads,
            clock.now,
            tick_s=TICK_S,
            keep=100,
        )

        async def tick(in_flight: int) -> float:
            clock.advance(timedelta(seconds=TICK_S))
            for sid in ids:
                for r in (1, 2):
                    loads.report(
                        replica_report(sid, f"{sid}-r{r}", clock.now(), in_flight=in_flight), clock.now()
                    )
            assert await lease.hold() is not None  # renewed each tick, as the loop does (not timed)
            started = time.perf_counter()
            await controller.tick()
            return time.perf_counter() - started

        try:
            holds = [await tick(4) for _ in range(ticks)]
            burst = await tick(40)
        finally:
            await lease.close()
        async with serving.store.pool.acquire() as conn:
            await conn.execute(f"DROP SCHEMA {serving.store.schema} CASCADE")
    return holds, burst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=10)
    parser.add_argument("--dsn", default=None, help="PostgreSQL (default: SUANLI_PG_DSN, :5432, embedded)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="suanli-bench-autoscaler-") as tmp:
        endpoint = None
        dsn, source = args.dsn, "--dsn"
        if dsn is None:
            endpoint = resolve_postgres(data_dir=Path(tmp) / "pg")
            dsn, source = endpoint.dsn, endpoint.source
        try:
            holds, burst = asyncio.run(run(dsn, args.services, args.ticks))
        finally:
            if endpoint is not None:
                endpoint.stop()
    print(
        f"autoscaler tick, {args.services} KPA services, PostgreSQL {source}: holding p50 "
        f"{statistics.median(holds) * 1000:,.0f} ms, max {max(holds) * 1000:,.0f} ms "
        f"over {args.ticks} ticks; "
        f"burst (every service scaled up) {burst * 1000:,.0f} ms; on {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    return 0 if burst < TICK_S and max(holds) < TICK_S else 1


if __name__ == "__main__":
    sys.exit(main())
