"""ResolveReplica's use case over a load view and a network state: policies, freshness, precise errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from suanli.clock import to_ms
from suanli.contracts.load import LoadView, ReplicaLoad, load_from_record
from suanli.errors import FailedPrecondition, InvalidArgument, NotFound
from suanli.routing.domain.links import LinkState, LinkStatus
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.replicas import ReplicaQuery, ReplicaResolver
from suanli.routing.testing import region_link, replica_load

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def load(replica: str, region: str, *, in_flight: int = 0, age_s: float = 0.0) -> ReplicaLoad:
    at = to_ms(NOW - timedelta(seconds=age_s))
    return load_from_record(replica_load("svc-a", replica, region, at, in_flight=in_flight, interval_s=1.0))


def resolver(*loads: ReplicaLoad, links: tuple[LinkState, ...] = ()) -> ReplicaResolver:
    view, network = LoadView(), NetworkState()
    for x in loads:
        view.report(x, NOW)
    for s in links:
        network.apply(s)
    return ReplicaResolver(view, network, lambda: NOW, intra_region_ms=1.0)


def test_round_robin_takes_turns_per_service_and_least_outstanding_the_idle() -> None:
    r = resolver(load("a1", "east", in_flight=3), load("a2", "east"))
    turns = [r.resolve(ReplicaQuery("svc-a", policy="round-robin")).chosen.load.replica_id for _ in range(3)]
    assert turns == ["a1", "a2", "a1"]
    chosen = r.resolve(ReplicaQuery("svc-a", policy="least-outstanding"))
    assert chosen.chosen.load.replica_id == "a2"
    assert [c.load.replica_id for c in chosen.alternatives] == ["a1"]


def test_network_aware_never_crosses_a_down_pair() -> None:
    r = resolver(load("a1", "west"), links=(region_link("east", "west", 40.0, LinkStatus.DOWN),))
    with pytest.raises(FailedPrecondition, match="unreachable from east"):
        r.resolve(ReplicaQuery("svc-a", client_region="east"))
    up = resolver(load("a1", "west"), links=(region_link("east", "west", 40.0),))
    found = up.resolve(ReplicaQuery("svc-a", client_region="east"))
    assert (found.chosen.load.replica_id, found.chosen.rtt_ms, found.choice.home_region) == (
        "a1",
        40.0,
        "west",
    )


def test_stale_excluded_unknown_and_bad_fields_are_precise() -> None:
    r = resolver(load("a1", "east", age_s=5.0))
    with pytest.raises(FailedPrecondition, match="no fresh replica"):
        r.resolve(ReplicaQuery("svc-a", policy="least-outstanding"))
    with pytest.raises(NotFound, match="svc-b"):
        r.resolve(ReplicaQuery("svc-b", policy="least-outstanding"))
    fresh = resolver(load("a1", "east"))
    with pytest.raises(FailedPrecondition, match="excluded"):
        fresh.resolve(ReplicaQuery("svc-a", policy="least-outstanding", exclude=("a1",)))
    for query, field in (
        (ReplicaQuery("svc-a", policy="fastest"), "policy"),
        (ReplicaQuery("svc-a"), "client_region"),
        (ReplicaQuery("svc-a", policy="round-robin", context_tokens=-1), "context_tokens"),
        (ReplicaQuery("", policy="round-robin"), "service_id"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            fresh.resolve(query)
        assert str(refused.value).startswith(f"{field}: ")


def test_requests_sent_since_a_report_count_until_a_newer_report_covers_them() -> None:
    # Both idle at their last report: without counting its own sends the resolver would send every
    # request of the interval to the first of them.
    view, clock = LoadView(), [NOW]
    for replica in ("a1", "a2"):
        view.report(load(replica, "east", age_s=0.5), NOW)
    r = ReplicaResolver(view, NetworkState(), lambda: clock[0], intra_region_ms=1.0)
    picks = []
    for policy in ("least-outstanding", "network-aware", "least-outstanding", "network-aware"):
        clock[0] += timedelta(milliseconds=100)
        query = ReplicaQuery("svc-a", client_region="east", policy=policy, context_tokens=500)
        picks.append(r.resolve(query).chosen.load.replica_id)
    assert picks == ["a1", "a2", "a1", "a2"]
    # a1 reports after its two, idle (they were answered): a2's two still count, so a1 takes the next two.
    view.report(load("a1", "east", age_s=-0.45), NOW)
    again = []
    for _ in range(2):
        clock[0] += timedelta(milliseconds=100)
        again.append(r.resolve(ReplicaQuery("svc-a", policy="least-outstanding")).chosen.load.replica_id)
    assert again == ["a1", "a1"]
    # A replica that stops reporting takes its sends with it.
    clock[0] += timedelta(seconds=10)
    with pytest.raises(FailedPrecondition, match="no fresh replica"):
        r.resolve(ReplicaQuery("svc-a", policy="least-outstanding"))
    assert r.sent.since(load("a2", "east", age_s=-10), clock[0]) == []
