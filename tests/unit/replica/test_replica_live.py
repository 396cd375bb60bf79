"""A live replica's pure part: admission bounds with precise reasons, answers timed by the model, reports."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from suanli.replica.live import (
    BadGenerate,
    Dropped,
    GenerateAsk,
    LiveReplica,
    Overloaded,
    ReplicaIdentity,
    Served,
    parse_generate,
)
from suanli.replica.service_time import ReplicaSpeed

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ME = ReplicaIdentity("svc-1", "svc-1-r1", "cn-east", "127.0.0.1:9000")


def speed(max_batch: int = 2, kv: int = 1_000) -> ReplicaSpeed:
    # Round figures: prefill 1000 tokens/s; a decode step is 10 ms.
    return ReplicaSpeed(1000.0, 0.008, 0.0, 0.0, kv_capacity_tokens=kv, max_batch=max_batch)


def live(**kwargs: int) -> LiveReplica:
    return LiveReplica(ME, speed(**kwargs), interval_s=1.0, queue_timeout_s=0.5, max_queued=2)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be a JSON object, got list"),
        ({"max_tokens": 4}, "context_tokens: required (a whole number of tokens, 1 or more)"),
        ({"context_tokens": 10}, "max_tokens: required (a whole number of tokens, 1 or more)"),
        (
            {"context_tokens": "10", "max_tokens": 4},
            "context_tokens: must be a whole number of tokens, got '10'",
        ),
        (
            {"context_tokens": True, "max_tokens": 4},
            "context_tokens: must be a whole number of tokens, got True",
        ),
        ({"context_tokens": 10, "max_tokens": 0}, "max_tokens: must be 1 or more, got 0"),
    ],
)
def test_a_bad_body_is_refused_with_the_field_named(body: object, message: str) -> None:
    with pytest.raises(BadGenerate) as refused:
        parse_generate(body)
    assert str(refused.value) == message


def test_answers_come_when_the_model_says_and_carry_ttft_and_latency() -> None:
    replica = live()
    rid, ended = replica.submit(parse_generate({"context_tokens": 100, "max_tokens": 11, "prompt": "x"}), 0.0)
    assert ended == [] and replica.next_event_s() == pytest.approx(0.1)  # the prefill's end
    assert replica.advance(0.15) == []
    [served] = replica.advance(1.0)
    assert isinstance(served, Served) and served.request_id == rid
    assert (served.generated_tokens, served.ttft_s, served.latency_s) == (
        11,
        pytest.approx(0.1),
        pytest.approx(0.2),
    )
    assert replica.next_event_s() == float("inf")


def test_bounds_refuse_at_once_with_the_reason_and_a_late_request_is_dropped() -> None:
    replica = live(max_batch=1)
    with pytest.raises(BadGenerate, match=r"= 1001 exceeds the replica's KV cache of 1000 tokens"):
        replica.submit(GenerateAsk(1000, 1), 0.0)
    replica.submit(GenerateAsk(100, 400), 0.0)  # in the batch for 0.1 + 399 x 10 ms
    replica.submit(GenerateAsk(100, 10), 0.0)
    replica.submit(GenerateAsk(100, 10), 0.0)
    with pytest.raises(Overloaded, match=r"^queue full: 2 requests waiting \(bound 2\)$"):
        replica.submit(GenerateAsk(10, 10), 0.0)
    ended = replica.advance(5.0)
    dropped = [e for e in ended if isinstance(e, Dropped)]
    assert [d.request_id for d in dropped] == [2, 3]
    assert dropped[0].reason.endswith("in the queue, over the queue timeout of 0.5 s")
    assert replica.arrived_total == 3 and replica.finished_total == 1


def test_a_queue_promising_more_than_a_whole_cache_is_refused() -> None:
    replica = LiveReplica(ME, speed(max_batch=1, kv=1_000), interval_s=1.0, max_queued=10)
    for _ in range(3):  # 1 in the batch (600 held), 2 queued (1200 promised): free is -800
        replica.submit(GenerateAsk(300, 300), 0.0)
    with pytest.raises(Overloaded, match=r"^KV cache full: 1800 tokens held or promised"):
        replica.submit(GenerateAsk(100, 150), 0.0)


def test_the_report_has_the_load_the_counters_and_the_interval_mean_latency() -> None:
    replica = live()
    replica.submit(GenerateAsk(100, 11), 0.0)
    replica.submit(GenerateAsk(100, 11), 0.0)
    busy = replica.report(AT)
    assert (busy.in_flight, busy.queued, busy.kv_free_tokens) == (1, 1, 1000 - 222)
    assert busy.prefill_backlog_s == pytest.approx(0.2)  # the current prefill and the queued one
    assert (busy.service_id, busy.replica_id, busy.region, busy.address) == tuple(
        getattr(ME, f) for f in ("service_id", "replica_id", "region", "address")
    )
    assert (busy.max_batch, busy.interval_s, busy.reported_at) == (2, 1.0, AT)
    assert busy.recent_latency_s == 0.0
    replica.advance(10.0)
    idle = replica.report(AT)
    assert (idle.in_flight, idle.queued, idle.kv_free_tokens) == (0, 0, 1000)
    assert (idle.arrived_total, idle.finished_total) == (2, 2)
    assert (idle.context_tokens_total, idle.generated_tokens_total) == (200, 22)
    # The second's prefill (0.1-0.2) stalls the first's decode; then both decode 10 steps together.
    assert idle.recent_latency_s == pytest.approx(0.3)
    assert replica.report(AT).recent_latency_s == idle.recent_latency_s  # nothing finished since: kept
