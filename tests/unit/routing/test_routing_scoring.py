"""Resolve's scoring: the CATS-style components, the ranking and every exclusion reason."""

from __future__ import annotations

import pytest

from suanli.routing.domain.links import REGION, LinkState, LinkStatus
from suanli.routing.domain.scoring import (
    Exclusion,
    Request,
    RoutingTable,
    ScoringPolicy,
    SitePool,
    UnknownRegion,
    Weights,
    WorkloadKind,
    resolve,
)

POLICY = ScoringPolicy(
    training=Weights(1, 1, 1), inference=Weights(0, 1, 0), rtt_ref_ms=50.0, intra_region_rtt_ms=1.0
)
H100, A100 = "H100 SXM", "A100 40GB SXM"


def region_link(
    src: str,
    dst: str,
    rtt: float,
    *,
    status: LinkStatus = LinkStatus.OK,
    loss: float = 0.0,
    bw: float | None = 10_000.0,
    reason: str = "",
) -> LinkState:
    return LinkState(
        f"region:{src}->{dst}", REGION, src, "", dst, "", rtt, rtt, (1.0,), loss, bw, 1000, status, reason, 10
    )


def pool(
    region: str,
    site: str,
    free: float,
    total: float = 1000.0,
    *,
    model: str = H100,
    rate: float | None = 0.01,
) -> SitePool:
    return SitePool(region, site, model.split()[0].lower(), model, free, total, rate)


def table(links: list[LinkState], pools: list[SitePool]) -> RoutingTable:
    return RoutingTable(pools, links)


LINKS = [
    region_link("Tokyo", "Osaka", 10.0),
    region_link("Tokyo", "Sydney", 110.0),
    region_link("Tokyo", "London", 220.0, status=LinkStatus.DOWN, reason="all 2 site paths down"),
]


def test_score_components_follow_the_documented_formulas() -> None:
    t = table(LINKS, [pool("Osaka", "osa-1", 600.0, rate=0.02)])
    (c,) = resolve(t, Request(WorkloadKind.TRAINING, "Tokyo", cu=100.0), POLICY).candidates
    assert c.compute == pytest.approx(0.5)  # (600 - 100) / 1000
    assert c.network == pytest.approx(1 / (1 + 10 / 50))
    assert c.price == pytest.approx(1.0)  # the cheapest fitting one
    assert c.score == pytest.approx((0.5 + 1 / 1.2 + 1.0) / 3)
    assert c.price_per_hour == pytest.approx(2.0)  # 100 CU x 0.02
    assert (c.rtt_ms, c.link_status, c.bandwidth_mbps) == (10.0, LinkStatus.OK, 10_000.0)


def test_candidates_rank_by_score_and_the_kind_picks_the_weights() -> None:
    pools = [
        pool("Tokyo", "tok-1", 100.0, rate=0.01),  # near, nearly full
        pool("Sydney", "syd-1", 1000.0, rate=0.01),  # far, empty
    ]
    t = table(LINKS, pools)
    training = resolve(t, Request(WorkloadKind.TRAINING, "Tokyo", cu=50.0), POLICY).candidates
    inference = resolve(t, Request(WorkloadKind.INFERENCE, "Tokyo", cu=50.0), POLICY).candidates
    assert [c.site for c in training] == ["syd-1", "tok-1"]  # compute headroom wins with equal weights
    assert [c.site for c in inference] == ["tok-1", "syd-1"]  # network alone: the origin region first
    assert inference[0].rtt_ms == 1.0  # the origin region's own sites: intra_region_rtt_ms
    assert inference[0].bandwidth_mbps is None
    bounded = resolve(t, Request(WorkloadKind.INFERENCE, "Tokyo", min_bandwidth_mbps=50_000.0), POLICY)
    assert [c.site for c in bounded.candidates] == ["tok-1"]  # no limit inside the unmeasured origin


def test_limit_returns_the_best_k_in_order() -> None:
    pools = [pool("Osaka", f"osa-{i}", float(100 * i)) for i in range(1, 10)]
    got = resolve(table(LINKS, pools), Request(WorkloadKind.TRAINING, "Tokyo", limit=3), POLICY)
    assert [c.site for c in got.candidates] == ["osa-9", "osa-8", "osa-7"]
    assert got.excluded_total == 0


def test_a_down_path_excludes_the_whole_region_with_the_links_reason() -> None:
    t = table(
        LINKS, [pool("London", "lon-1", 900.0), pool("London", "lon-2", 900.0), pool("Osaka", "osa-1", 9)]
    )
    got = resolve(t, Request(WorkloadKind.TRAINING, "Tokyo"), POLICY)
    assert [c.region for c in got.candidates] == ["Osaka"]
    assert [(e.region, e.site, e.code) for e in got.excluded] == [("London", "", Exclusion.LINK_DOWN)]
    assert got.excluded[0].reason == "path Tokyo->London is DOWN: all 2 site paths down"
    assert got.excluded_total == 2


def test_unmeasured_paths_rtt_and_bandwidth_limits_exclude_regions() -> None:
    links = [*LINKS, region_link("Tokyo", "Madrid", 250.0, bw=None)]
    pools = [pool(r, r[:3].lower(), 900.0) for r in ("Osaka", "Sydney", "Madrid", "Dallas")]
    t = table(links, pools)
    got = resolve(t, Request(WorkloadKind.TRAINING, "Tokyo", max_rtt_ms=100.0), POLICY)
    reasons = {e.region: (e.code, e.reason) for e in got.excluded}
    assert reasons["Sydney"] == (Exclusion.RTT, "rtt 110.0 ms on Tokyo->Sydney > max_rtt_ms 100")
    assert reasons["Dallas"] == (Exclusion.NO_PATH, "no network measurement on Tokyo->Dallas")
    assert reasons["Madrid"][0] is Exclusion.RTT
    bw = resolve(t, Request(WorkloadKind.TRAINING, "Tokyo", min_bandwidth_mbps=20_000.0), POLICY)
    by_region = {e.region: e.reason for e in bw.excluded}
    assert by_region["Madrid"] == "bandwidth on Tokyo->Madrid not measured < min_bandwidth_gbps 20"
    assert by_region["Osaka"] == "bandwidth on Tokyo->Osaka 10.00 Gbps < min_bandwidth_gbps 20"


def test_site_reasons_gpu_model_capacity_price_and_missing_rate() -> None:
    pools = [
        pool("Osaka", "osa-a100", 900.0, model=A100),
        pool("Osaka", "osa-small", 10.0),
        pool("Osaka", "osa-dear", 900.0, rate=1.0),
        pool("Osaka", "osa-unpriced", 900.0, rate=None),
        pool("Osaka", "osa-ok", 900.0),
    ]
    request = Request(
        WorkloadKind.TRAINING, "Tokyo", models=frozenset({H100}), cu=100.0, max_price_per_hour=5.0, explain=10
    )
    got = resolve(table(LINKS, pools), request, POLICY)
    assert [c.site for c in got.candidates] == ["osa-ok"]
    assert {e.site: (e.code, e.reason) for e in got.excluded} == {
        "osa-a100": (Exclusion.GPU_MODEL, "gpu model A100 40GB SXM not in gpu_models ['H100 SXM']"),
        "osa-small": (Exclusion.CAPACITY, "free 10.0 CU < cu 100"),
        "osa-dear": (Exclusion.PRICE, "price 100.0000/h > max_price_per_hour 5"),
        "osa-unpriced": (Exclusion.NO_PRICE, "the price book has no rate for h100 in Osaka"),
    }


def test_without_explain_pool_reasons_are_one_counted_line_per_region_and_reason() -> None:
    pools = [
        pool("London", "lon-1", 900.0),
        *(pool("Osaka", f"osa-{i}", 1.0) for i in range(100)),
        pool("Osaka", "osa-a100", 900.0, model=A100),
        pool("Sydney", "syd-1", 1.0),
    ]
    request = Request(WorkloadKind.TRAINING, "Tokyo", models=frozenset({H100}), cu=10.0)
    got = resolve(table(LINKS, pools), request, POLICY)
    assert got.candidates == ()
    assert [(e.region, e.site, e.code, e.count, e.reason) for e in got.excluded] == [
        ("London", "", Exclusion.LINK_DOWN, 1, "path Tokyo->London is DOWN: all 2 site paths down"),
        ("Osaka", "", Exclusion.GPU_MODEL, 1, "1 pool with a gpu model not in gpu_models ['H100 SXM']"),
        ("Osaka", "", Exclusion.CAPACITY, 100, "100 pools with fewer free CU than cu 10"),
        ("Sydney", "", Exclusion.CAPACITY, 1, "1 pool with fewer free CU than cu 10"),
    ]
    assert got.excluded_total == 103


def test_explain_lists_pools_one_by_one_up_to_its_limit() -> None:
    pools = [pool("London", "lon-1", 1.0), *(pool("Osaka", f"osa-{i}", 1.0) for i in range(100))]
    got = resolve(table(LINKS, pools), Request(WorkloadKind.TRAINING, "Tokyo", cu=10.0, explain=4), POLICY)
    assert [e.code for e in got.excluded] == [Exclusion.LINK_DOWN] + [Exclusion.CAPACITY] * 4
    assert [e.site for e in got.excluded[1:]] == ["osa-0", "osa-1", "osa-2", "osa-3"]
    assert got.excluded_total == 101


def test_an_unknown_origin_names_the_field_and_the_known_regions() -> None:
    with pytest.raises(
        UnknownRegion, match=r"from_region: unknown region 'Mars'; known regions: London, Osaka"
    ):
        resolve(table(LINKS, []), Request(WorkloadKind.TRAINING, "Mars"), POLICY)


def test_weights_are_checked() -> None:
    with pytest.raises(ValueError, match="not all 0"):
        Weights(0, 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        Weights(-1, 1, 1)
