"""The load view: the newest full-state report per replica, fresh ones only; bad reports refused."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from suanli.contracts.load import InvalidLoad, LoadView, ReplicaLoad

T0 = datetime(2026, 12, 1, tzinfo=UTC)
REPORT = ReplicaLoad(
    service_id="svc-1",
    replica_id="svc-1-r1",
    region="tokyo",
    address="10.0.0.7:8000",
    in_flight=3,
    queued=1,
    max_batch=16,
    prefill_tokens_per_s=3000.0,
    decode_step_s=0.05,
    recent_latency_s=2.5,
    prefill_backlog_s=0.2,
    kv_free_tokens=9000,
    interval_s=2.0,
    reported_at=T0,
)


def test_the_newest_report_wins_and_a_replica_that_stops_reporting_is_left_out() -> None:
    view = LoadView()
    assert view.report(REPORT, T0)
    assert view.report(replace(REPORT, in_flight=5, reported_at=T0 + timedelta(seconds=2)), T0)
    assert not view.report(replace(REPORT, in_flight=9), T0)  # older than the one held: redelivered
    other = replace(REPORT, replica_id="svc-1-r2", reported_at=T0)
    view.report(other, T0)
    view.report(replace(REPORT, service_id="svc-2", replica_id="svc-2-r1"), T0)
    now = T0 + timedelta(seconds=6)  # r2's last report is 3 intervals old: still fresh
    assert {r: load.in_flight for r, load in view.of("svc-1", now).items()} == {"svc-1-r1": 5, "svc-1-r2": 3}
    later = T0 + timedelta(seconds=7)
    assert set(view.of("svc-1", later)) == {"svc-1-r1"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"in_flight": -1}, "in_flight: must be 0 or more (got -1)"),
        ({"max_batch": 0}, "max_batch: must be 1 or more (got 0)"),
        ({"arrived_total": -3}, "arrived_total: must be 0 or more (got -3)"),
        ({"decode_step_s": float("nan")}, "decode_step_s: must be a finite number, 0 or more (got nan)"),
        ({"interval_s": 0.0}, "interval_s: must be above 0 (got 0.0)"),
        ({"replica_id": ""}, "a load report names its service_id and replica_id"),
    ],
)
def test_reports_that_cannot_be_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidLoad) as refused:
        replace(REPORT, **change)  # type: ignore[arg-type]
    assert str(refused.value) == message
