"""Load balancing: round-robin, least-outstanding, power-of-two and ours with its spill-over rule."""

from __future__ import annotations

import itertools

import pytest

from suanli.errors import InvalidArgument
from suanli.resources.network import measured_network
from suanli.routing.domain.balancing import (
    Endpoint,
    InferenceRequest,
    LeastOutstanding,
    NetworkAware,
    NoEndpoint,
    PowerOfTwo,
    RoundRobin,
    expected_latency_s,
    measured_rtt,
    view_rtt,
    with_sent,
)
from suanli.routing.domain.links import REGION, LinkState, LinkStatus

RTT = {
    ("dallas", "dallas"): 1.0,
    ("tokyo", "tokyo"): 1.0,
    ("dallas", "tokyo"): 140.0,
    ("tokyo", "dallas"): 140.0,
}


def rtt(src: str, dst: str) -> float:
    return RTT[(src, dst)]


def ep(
    name: str, region: str = "dallas", in_flight: int = 0, queued: int = 0, backlog: float = 0.0
) -> Endpoint:
    return Endpoint(
        endpoint_id=name,
        region=region,
        in_flight=in_flight,
        queued=queued,
        max_batch=16,
        prefill_tokens_per_s=3000.0,
        decode_step_s=0.05,
        recent_latency_s=10.0,
        prefill_backlog_s=backlog,
    )


REQUEST = InferenceRequest("dallas", context_tokens=1500, generated_tokens=101)


def test_round_robin_takes_each_in_turn() -> None:
    policy = RoundRobin()
    endpoints = [ep("a"), ep("b", in_flight=9), ep("c")]
    assert [policy.pick(REQUEST, endpoints).endpoint.endpoint_id for _ in range(4)] == ["a", "b", "c", "a"]


def test_least_outstanding_counts_in_flight_and_queued() -> None:
    endpoints = [ep("a", in_flight=3, queued=2), ep("b", in_flight=4), ep("c", in_flight=4, queued=1)]
    choice = LeastOutstanding().pick(REQUEST, endpoints)
    assert choice.endpoint.endpoint_id == "b"
    assert "4 outstanding" in choice.reason


def test_power_of_two_takes_the_less_loaded_of_two_distinct_draws() -> None:
    draws = itertools.cycle([0, 0])  # the second draw is shifted past the first: always two distinct
    policy = PowerOfTwo(lambda n: next(draws))
    endpoints = [ep("a", in_flight=5), ep("b", in_flight=1), ep("c")]
    assert policy.pick(REQUEST, endpoints).endpoint.endpoint_id == "b"
    assert PowerOfTwo(lambda n: 0).pick(REQUEST, [ep("solo")]).endpoint.endpoint_id == "solo"


def test_no_endpoint_is_a_failed_precondition() -> None:
    for policy in (RoundRobin(), LeastOutstanding(), PowerOfTwo(lambda n: 0), NetworkAware(rtt)):
        with pytest.raises(NoEndpoint):
            policy.pick(REQUEST, [])


def test_the_expected_latency_adds_network_queue_prefill_and_decode() -> None:
    idle = expected_latency_s(REQUEST, ep("a"), rtt)
    assert idle == pytest.approx(0.001 + 1500 / 3000 + 100 * 0.05)
    busy = expected_latency_s(REQUEST, ep("a", in_flight=16, backlog=1.0), rtt)
    assert busy == pytest.approx(idle + 1.0 + 10.0 / 16)
    far = expected_latency_s(REQUEST, ep("t", region="tokyo"), rtt)
    assert far == pytest.approx(idle + 0.139)


def test_ours_stays_home_when_a_spill_would_not_lower_the_expected_latency() -> None:
    policy = NetworkAware(rtt)
    endpoints = [ep("t", region="tokyo"), ep("d1", in_flight=3), ep("d2", in_flight=1)]
    choice = policy.pick(REQUEST, endpoints)
    assert choice.endpoint.endpoint_id == "d2"  # home, fewer outstanding on a tie
    assert not choice.spilled and choice.home_region == "dallas"


def test_ours_spills_only_when_the_remote_region_is_faster_by_the_margin() -> None:
    policy = NetworkAware(rtt, spill_margin_s=0.05)
    # Home is 0.15 s of prefill backlog behind: remote costs 0.139 s more RTT, saves 0.15: under the margin.
    close = [ep("d", backlog=0.15), ep("t", region="tokyo")]
    assert not policy.pick(REQUEST, close).spilled
    # 2 s behind: the spill saves 1.86 s.
    far = [ep("d", in_flight=16, backlog=2.0), ep("t", region="tokyo")]
    choice = policy.pick(REQUEST, far)
    assert choice.spilled and choice.endpoint.endpoint_id == "t"
    assert choice.expected_s is not None and choice.home_expected_s is not None
    assert choice.expected_s < choice.home_expected_s
    assert "spilled from dallas" in choice.reason


def test_a_client_in_a_region_without_replicas_is_served_from_the_nearest() -> None:
    network = measured_network()
    policy = NetworkAware(measured_rtt(network))
    request = InferenceRequest("osaka", 500, 50)
    choice = policy.pick(request, [ep("d"), ep("t", region="tokyo")])
    assert choice.home_region == "tokyo" and choice.endpoint.endpoint_id == "t"


def test_the_measured_rtt_reads_the_tables() -> None:
    network = measured_network()
    rtt_ms = measured_rtt(network)
    assert rtt_ms("dallas", "tokyo") == network.region_rtt("dallas", "tokyo")
    assert 0.5 < rtt_ms("dallas", "dallas") < 3.0  # the mean of its zone pairs
    assert measured_rtt(network, intra_region_ms=0.2)("tokyo", "tokyo") == 0.2
    with pytest.raises(InvalidArgument, match="spill_margin_s must be >= 0"):
        NetworkAware(rtt_ms, spill_margin_s=-1)
    with pytest.raises(InvalidArgument, match="no measured RTT from 'dallas' to 'atlantis'"):
        rtt_ms("dallas", "atlantis")


def _pair(src: str, dst: str, rtt_ms: float, status: LinkStatus) -> LinkState:
    return LinkState(
        f"region:{src}->{dst}",
        REGION,
        src,
        "",
        dst,
        "",
        rtt_ms,
        rtt_ms,
        (1.0,),
        0.0,
        None,
        1000,
        status,
        "",
        10,
    )


def test_the_network_view_steers_around_a_down_region_pair() -> None:
    view = {
        ("dallas", "tokyo"): _pair("dallas", "tokyo", 150.0, LinkStatus.DEGRADED),
        ("tokyo", "dallas"): _pair("tokyo", "dallas", 150.0, LinkStatus.DOWN),
    }
    rtt_ms = view_rtt(view, rtt)
    assert rtt_ms("dallas", "tokyo") == 150.0  # the view's EWMA, not the table's 140
    assert rtt_ms("dallas", "dallas") == 1.0  # not in the view: the fallback
    policy = NetworkAware(rtt_ms)
    # A Tokyo client whose path to Dallas is DOWN is served in Tokyo even when Tokyo is far busier.
    request = InferenceRequest("tokyo", 1500, 101)
    choice = policy.pick(request, [ep("d"), ep("t", region="tokyo", in_flight=16, backlog=5.0)])
    assert choice.endpoint.endpoint_id == "t" and not choice.spilled
    with pytest.raises(NoEndpoint, match="unreachable from tokyo"):
        policy.pick(request, [ep("d")])


def test_requests_sent_since_the_report_count_as_queued_work() -> None:
    base = ep("a", in_flight=2, backlog=0.5)
    sent = [REQUEST, InferenceRequest("dallas", context_tokens=1500, generated_tokens=1)]
    seen = with_sent(base, sent)
    assert (seen.in_flight, seen.queued, seen.outstanding) == (2, 2, 4)
    assert seen.prefill_backlog_s == pytest.approx(0.5 + 3000 / 3000.0)
    assert seen.kv_free_tokens == base.kv_free_tokens - (1601 + 1501)
    assert with_sent(base, []) is base
    # Ours sees the sent prefills ahead: an idle replica with two sends is now the slower one.
    idle = ep("b", backlog=0.9)
    assert NetworkAware(rtt).pick(REQUEST, [seen, idle]).endpoint.endpoint_id == "b"
    assert NetworkAware(rtt).pick(REQUEST, [base, idle]).endpoint.endpoint_id == "a"
