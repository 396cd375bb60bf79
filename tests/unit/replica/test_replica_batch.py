"""The replica queue: prefill first, lock-step decode, batch and KV limits, queue timeout."""

from __future__ import annotations

import math

import pytest

from suanli.replica.batch import ReplicaQueue, Request
from suanli.replica.service_time import ReplicaSpeed


def speed(max_batch: int = 4, kv: int = 100_000) -> ReplicaSpeed:
    # Round figures: prefill 1000 tokens/s; a step is 2 ms overhead + 8 ms (no KV or compute term).
    return ReplicaSpeed(
        prefill_tokens_per_s=1000.0,
        weight_read_s=0.008,
        kv_read_s_per_token=0.0,
        compute_s_per_token=0.0,
        kv_capacity_tokens=kv,
        max_batch=max_batch,
    )


def req(i: int, at: float, context: int = 100, generated: int = 11) -> Request:
    return Request(i, at, context, generated)


def test_one_request_prefills_then_decodes_one_token_per_step() -> None:
    replica = ReplicaQueue(speed())
    assert replica.submit(req(0, 0.0), 0.0) == []
    done = replica.advance(10.0)
    assert [o.request.request_id for o in done] == [0]
    r = done[0].request
    assert r.first_token_s == pytest.approx(0.1)  # 100 tokens at 1000/s
    assert r.done_s == pytest.approx(0.1 + 10 * 0.010)  # 10 more tokens, 10 ms each
    assert replica.outstanding == 0
    assert replica.recent_latency_s == pytest.approx(0.2)


def test_a_prefill_stalls_the_batch_decode() -> None:
    replica = ReplicaQueue(speed())
    replica.submit(req(0, 0.0, generated=21), 0.0)
    replica.submit(req(1, 0.15, context=200), 0.15)  # prefill 0.2 s from 0.15, during request 0's decode
    done = {o.request.request_id: o.request for o in replica.advance(10.0)}
    assert done[1].first_token_s == pytest.approx(0.35)
    # Request 0 decoded 5 tokens by 0.15, stalled 0.2 s, then 15 more.
    assert done[0].done_s == pytest.approx(0.1 + 20 * 0.010 + 0.2)


def test_the_batch_limit_queues_the_rest_in_order() -> None:
    replica = ReplicaQueue(speed(max_batch=2))
    for i in range(3):
        replica.submit(req(i, 0.0), 0.0)
    assert replica.in_flight == 1 and len(replica.queue) == 2  # one prefilling
    replica.advance(0.15)
    assert replica.in_flight == 2 and len(replica.queue) == 1
    done = replica.advance(10.0)
    assert [o.request.request_id for o in done] == [0, 1, 2]
    assert done[2].request.first_token_s > done[0].request.done_s - 1e-9


def test_the_kv_cache_limits_admission_but_never_blocks_an_idle_replica() -> None:
    replica = ReplicaQueue(speed(kv=150))
    replica.submit(req(0, 0.0, context=100, generated=11), 0.0)
    replica.submit(req(1, 0.0, context=100, generated=11), 0.0)
    replica.advance(0.15)
    assert replica.in_flight == 1 and len(replica.queue) == 1  # 111 + 111 > 150
    assert replica.kv_free_tokens() == 150 - 111 - 111
    big = ReplicaQueue(speed(kv=50))
    big.submit(req(0, 0.0), 0.0)
    assert big.in_flight == 1


def test_a_request_that_waited_past_the_timeout_is_dropped() -> None:
    replica = ReplicaQueue(speed(max_batch=1), queue_timeout_s=0.05)
    replica.submit(req(0, 0.0), 0.0)
    replica.submit(req(1, 0.0), 0.0)
    outcomes = replica.advance(10.0)
    assert [(o.request.request_id, o.dropped) for o in outcomes] == [(0, False), (1, True)]
    assert math.isnan(outcomes[1].request.first_token_s)


def test_a_single_token_answer_ends_with_its_prefill() -> None:
    replica = ReplicaQueue(speed())
    replica.submit(req(0, 0.0, generated=1), 0.0)
    (done,) = replica.advance(1.0)
    assert done.request.done_s == pytest.approx(done.request.first_token_s) == pytest.approx(0.1)


def test_the_load_report_and_the_prefill_backlog() -> None:
    replica = ReplicaQueue(speed(max_batch=1))
    replica.submit(req(0, 0.0, context=500), 0.0)
    replica.submit(req(1, 0.0, context=300), 0.0)
    replica.advance(0.2)
    load = replica.load()
    assert (load.in_flight, load.queued) == (1, 1)
    assert replica.prefill_backlog_s() == pytest.approx(0.3 + 0.3)  # rest of 0.5 s, then 0.3 s queued
    assert replica.next_event_s() == pytest.approx(0.5)
    assert ReplicaQueue(speed()).next_event_s() == math.inf
