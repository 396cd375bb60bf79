"""Resolve as a use case: the views feed the table, requests are checked field by field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from suanli.clock import ManualClock, to_ms
from suanli.contracts import decode, encode
from suanli.data import data_path
from suanli.errors import InvalidArgument
from suanli.resources.pricebook_file import load_pricebook
from suanli.routing.domain.links import LinkStatus, Probe, ViewPolicy
from suanli.routing.domain.scoring import Exclusion, ScoringPolicy
from suanli.routing.domain.view import NetworkView
from suanli.routing.service_layer.capacity import CapacityState
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.records import EVENT, link_record, link_state
from suanli.routing.service_layer.router import ResolveQuery, Router
from suanli.routing.testing import node_capacity

NOW = datetime(2026, 3, 1, tzinfo=UTC)
BOOK = load_pricebook(data_path("deploy/billing/pricebook.yaml"))


def published(view: NetworkView, *probes: Probe) -> list:
    """What the processor would publish, through the Avro record and back, as the API reads it."""
    out = []
    for p in probes:
        for state in view.observe(p, p.at_ms):
            record = link_record(
                state, producer="routing/test", event_id="00000000-0000-4000-8000-000000000001", at=NOW
            )
            out.append(link_state(decode(encode(EVENT, record))[1]))
    return out


def router() -> tuple[Router, NetworkState, CapacityState]:
    network, capacity = NetworkState(), CapacityState()
    view = NetworkView(ViewPolicy())
    at = to_ms(NOW)
    for state in published(
        view,
        Probe("Tokyo", "tok-1", "Osaka", "osa-1", 8.0, 0.5, 0.0, 9000.0, 5, at),
        Probe("Tokyo", "tok-1", "London", "lon-1", 0.0, 0.0, 1.0, None, 5, at),
    ):
        network.apply(state)
    capacity.apply(node_capacity("n1", "Osaka", "osa-1", at, gpus=8, used_gpus=2), at)
    capacity.apply(node_capacity("n2", "London", "lon-1", at), at)
    capacity.apply(
        node_capacity(
            "n3", "Tokyo", "tok-1", at, model="NVIDIA A100-SXM4-80GB", device_class="a100-80gb-sxm"
        ),
        at,
    )
    return Router(network, capacity, BOOK, ScoringPolicy(), ManualClock(NOW)), network, capacity


def test_resolve_ranks_from_the_views_with_prices_from_the_book() -> None:
    r, _, _ = router()
    got = r.resolve(ResolveQuery(kind="training", from_region="Tokyo", gpu_models=("H100",), cu=989.0))
    (best,) = got.candidates
    assert (best.region, best.site, best.device_class) == ("Osaka", "osa-1", "h100-80gb-sxm")
    assert best.free_cu == pytest.approx(6 * 989.0)
    assert best.price_per_hour == pytest.approx(989.0 * 0.0120)  # h100 in the 2025-07 version
    excluded = {(e.region, e.code) for e in got.excluded}
    assert ("London", Exclusion.LINK_DOWN) in excluded
    assert ("Tokyo", Exclusion.GPU_MODEL) in excluded


def test_the_table_follows_the_views() -> None:
    r, network, capacity = router()
    first = r.table()
    assert r.table() is first  # nothing changed: no rebuild
    capacity.apply(node_capacity("n1", "Osaka", "osa-1", to_ms(NOW) + 1, used_gpus=8), to_ms(NOW) + 1)
    got = r.resolve(ResolveQuery(kind="training", from_region="Tokyo", gpu_models=("H100",), cu=989.0))
    assert got.candidates == ()
    assert [e.code for e in got.excluded if e.region == "Osaka"] == [Exclusion.CAPACITY]
    assert network.links["region:Tokyo->London"].status is LinkStatus.DOWN


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            ResolveQuery(kind="batch", from_region="Tokyo"),
            "kind: unknown kind 'batch'; one of training, inference",
        ),
        (ResolveQuery(kind="training", from_region=""), "from_region: is required"),
        (
            ResolveQuery(kind="training", from_region="Mars"),
            "from_region: unknown region 'Mars'; known regions: London, Osaka, Tokyo",
        ),
        (
            ResolveQuery(kind="training", from_region="Tokyo", max_rtt_ms=-1),
            "max_rtt_ms: must be a finite number >= 0",
        ),
        (
            ResolveQuery(kind="training", from_region="Tokyo", cu=float("nan")),
            "cu: must be a finite number >= 0",
        ),
        (ResolveQuery(kind="training", from_region="Tokyo", limit=5000), "limit: must be in 0..1000"),
        (
            ResolveQuery(kind="training", from_region="Tokyo", gpu_models=("Quantum9000",)),
            "gpu_models: unknown GPU model 'Quantum9000'; models at the sites: A100 80GB SXM, H100 SXM",
        ),
    ],
)
def test_bad_requests_name_the_field(query: ResolveQuery, message: str) -> None:
    r, _, _ = router()
    with pytest.raises(InvalidArgument) as caught:
        r.resolve(query)
    assert str(caught.value).startswith(message)


def test_capacity_keeps_the_newest_report_of_a_node() -> None:
    capacity = CapacityState()
    assert capacity.apply(node_capacity("n1", "Osaka", "osa-1", 2000, used_gpus=1), 2000)
    assert not capacity.apply(node_capacity("n1", "Osaka", "osa-1", 1000), 1000)
    (p,) = capacity.pools(BOOK, NOW)
    assert p.free_cu == pytest.approx(7 * 989.0)


def test_the_network_view_keeps_the_newest_state_and_tells_watchers() -> None:
    network = NetworkState()
    view = NetworkView(ViewPolicy())
    states = published(view, Probe("Tokyo", "tok-1", "Osaka", "osa-1", 8.0, 0.5, 0.0, None, 5, 1000))
    with network.watch() as changes:
        for s in states:
            assert network.apply(s)
        assert not network.apply(states[0])  # a compacted topic read again
        assert changes.qsize() == 2
    assert network.regions() == {"Tokyo", "Osaka"}
    assert [s.link_id for s in network.region_links()] == ["region:Tokyo->Osaka"]
