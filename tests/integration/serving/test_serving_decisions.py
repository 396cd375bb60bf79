"""The autoscaler's decisions on PostgreSQL (no broker): a scaling and its decision commit together
(ServiceScaled with reason autoscaler:kpa in the outbox), the last N changes and the latest hold are kept
per service, newest first; a unit fenced by a lease it does not hold writes nothing."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest

from suanli.clock import ManualClock
from suanli.contracts import decode
from suanli.contracts.load import LoadView
from suanli.eventstore.lease import LeaseLost
from suanli.serving.adapters.lease import AutoscalerLease
from suanli.serving.bootstrap import bootstrap
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.autoscaler import PRINCIPAL, AutoscalerController
from suanli.serving.testing import replica_report

pytestmark = pytest.mark.timeout(60)

SPEC = {
    "name": "chat",
    "model": "llama-2-7b",
    "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"]},
    "min_replicas": 1,
    "max_replicas": 3,
    "target": {"concurrency": 4},
    "autoscaling": {"policy": "kpa", "stable_window_s": 4, "panic_window_s": 2},
}


async def test_decisions_are_kept_bounded_with_their_scaling_and_fenced_by_the_lease(pg_dsn: str) -> None:
    settings = ServingSettings.load(
        {}, kafka_bootstrap="unused:9092", pg_dsn=pg_dsn, db_schema=f"srv_{secrets.token_hex(4)}"
    )
    clock = ManualClock(datetime(2026, 12, 2, tzinfo=UTC))
    async with bootstrap(settings, clock) as serving:
        async with serving.uow.begin() as unit:
            created = await serving.service.create(unit, "acme", dict(SPEC), 0, "alice@acme")
        sid, replica = created.service_id, f"{created.service_id}-r1"
        lease = AutoscalerLease(pg_dsn, serving.store.schema, lease_s=5.0)
        loads = LoadView()
        fenced = serving.uow.fenced(lease.check)
        controller = AutoscalerController(
            serving.service, fenced, serving.queries, loads, clock.now, tick_s=2.0, keep=1
        )

        async def tick(in_flight: int) -> None:
            clock.advance(timedelta(seconds=2))
            loads.report(replica_report(sid, replica, clock.now(), in_flight=in_flight), clock.now())
            await controller.tick()

        with pytest.raises(LeaseLost):  # not holding the lease: nothing is written
            await tick(12)
        assert await serving.queries.decisions(sid, 10) == []
        assert await lease.hold() is not None
        controller.forget()
        try:
            await tick(12)  # panic: 1 -> 3
            await tick(12)  # held
            for _ in range(4):
                await tick(0)  # a stable window past the panic: 3 -> 1
        finally:
            await lease.close()

        kept = await serving.queries.decisions(sid, 10)
        # keep=1: the latest change (3 -> 1) and the latest hold; the first change was dropped.
        assert [(d.changed, d.from_replicas, d.decision.desired) for d in kept] == [
            (False, 1, 1),
            (True, 3, 1),
        ]
        change = next(d for d in kept if d.changed)
        assert change.decision.inputs.ready == 1 and change.decision.model[0][0] == "stable_concurrency"
        outbox = [decode(r.value) for r in await serving.store.pending_outbox(1000)]
        scaled = [(r["to_replicas"], r["reason"], r["principal"]) for n, r in outbox if n == "ServiceScaled"]
        assert scaled[1:] == [(3, "autoscaler:kpa", PRINCIPAL), (1, "autoscaler:kpa", PRINCIPAL)]
