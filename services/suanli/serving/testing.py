"""Load reports for tests: a replica's `ReplicaLoad` with the numbers a test sets, the rest fixed."""

from __future__ import annotations

from datetime import datetime

from suanli.contracts.load import ReplicaLoad


def replica_report(
    service_id: str,
    replica_id: str,
    at: datetime,
    *,
    in_flight: int = 0,
    queued: int = 0,
    arrived: int = 0,
    finished: int = 0,
    context: int = 0,
    generated: int = 0,
) -> ReplicaLoad:
    """A report at `at`, every 2 s, with counters `arrived`, `finished`, `context`, `generated` tokens."""
    return ReplicaLoad(
        service_id=service_id,
        replica_id=replica_id,
        region="cn-east",
        address="10.0.0.1:8000",
        in_flight=in_flight,
        queued=queued,
        max_batch=16,
        prefill_tokens_per_s=3000.0,
        decode_step_s=0.05,
        recent_latency_s=1.0,
        prefill_backlog_s=0.0,
        kv_free_tokens=9000,
        interval_s=2.0,
        reported_at=at,
        arrived_total=arrived,
        finished_total=finished,
        context_tokens_total=context,
        generated_tokens_total=generated,
    )
