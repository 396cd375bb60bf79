"""The fast Resolve gives exactly the answers of the straightforward one (`routing_oracle`) on
randomised views: the same candidates in the same order with the same score components, the same
exclusions with the same reasons and counts, the same totals."""

from __future__ import annotations

import random

import pytest
from routing_oracle import OracleTable, oracle_resolve

from suanli.routing.domain.links import REGION, LinkState, LinkStatus
from suanli.routing.domain.scoring import (
    Request,
    RoutingTable,
    ScoringPolicy,
    SitePool,
    Weights,
    WorkloadKind,
    resolve,
)

MODELS = ("H100 SXM", "A100 40GB SXM", "L40S")
REGIONS = ("Dallas", "Frankfurt", "London", "Madrid", "Osaka", "Sydney", "Tokyo", "Toronto")
POLICIES = (
    ScoringPolicy(),
    ScoringPolicy(Weights(1, 1, 1), Weights(0, 1, 0), rtt_ref_ms=20.0, intra_region_rtt_ms=0.5),
)


def view(rng: random.Random) -> tuple[list[SitePool], list[LinkState]]:
    regions = rng.sample(REGIONS, rng.randint(2, len(REGIONS)))
    links = []
    for src in regions:
        for dst in regions:
            if rng.random() < 0.15:
                continue  # unmeasured pair
            status = rng.choice((LinkStatus.OK,) * 5 + (LinkStatus.DEGRADED, LinkStatus.DOWN))
            rtt = 1.0 if src == dst else float(rng.choice((5, 10, 40, 80, 150, 250)))
            bandwidth = rng.choice((None, 1_000.0, 10_000.0, 40_000.0))
            links.append(
                LinkState(
                    f"region:{src}->{dst}",
                    REGION,
                    src,
                    "",
                    dst,
                    "",
                    rtt,
                    rtt,
                    (0.5,),
                    rng.choice((0.0, 0.0, 0.01, 0.2)),
                    bandwidth,
                    1000,
                    status,
                    "probes lost" if status is LinkStatus.DOWN else "",
                    10,
                )
            )
    pools = []
    # Few distinct values, so that equal scores (and the order among them) are exercised.
    for i in range(rng.randint(0, 300)):
        region = rng.choice(regions + ["Sao Paulo"] * (i % 50 == 0))
        total = float(rng.choice((0, 800, 1000, 1000, 2400)))
        free = float(rng.choice((0, 100, 400, 800))) if total else 0.0
        rate = rng.choice((None, 0.0, 0.01, 0.01, 0.02, 0.05)) if i % 7 else 0.01
        model = rng.choice(MODELS)
        pools.append(
            SitePool(region, f"{region[:3].lower()}-{i}", model.split()[0].lower(), model, free, total, rate)
        )
    return pools, links


def request(rng: random.Random, regions: tuple[str, ...]) -> Request:
    return Request(
        kind=rng.choice(tuple(WorkloadKind)),
        origin=rng.choice(regions),
        max_rtt_ms=rng.choice((0.0, 0.0, 50.0, 100.0, 200.0)),
        min_bandwidth_mbps=rng.choice((0.0, 0.0, 5_000.0, 20_000.0)),
        models=frozenset(rng.sample(MODELS, rng.randint(0, 2))),
        cu=rng.choice((0.0, 0.0, 50.0, 100.0, 400.0, 900.0)),
        max_price_per_hour=rng.choice((0.0, 0.0, 1.0, 5.0, 30.0)),
        limit=rng.choice((1, 3, 10, 10, 50, 1000)),
        explain=rng.choice((0, 0, 0, 3, 50)),
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_answers_exactly_as_the_straightforward_one(seed: int) -> None:
    rng = random.Random(seed)
    pools, links = view(rng)
    fast, oracle = RoutingTable(pools, links), OracleTable(pools, links)
    assert fast.regions == oracle.regions
    if not fast.regions:
        return
    policy = POLICIES[seed % len(POLICIES)]
    # Many requests against one table: its caches (per origin, network limits, model set) are reused.
    for _ in range(60):
        asked = request(rng, fast.regions)
        expected = oracle_resolve(oracle, asked, policy)
        got = resolve(fast, asked, policy)
        assert got.candidates == expected.candidates, asked
        assert got.excluded == expected.excluded, asked
        assert got.excluded_total == expected.excluded_total, asked


def test_equal_scores_rank_in_pool_order_whatever_the_limit() -> None:
    pools = [SitePool("Osaka", f"osa-{i}", "h100", "H100 SXM", 500.0, 1000.0, 0.01) for i in range(200)]
    links = [
        LinkState(
            "region:Tokyo->Osaka",
            REGION,
            "Tokyo",
            "",
            "Osaka",
            "",
            9.0,
            9.0,
            (0.5,),
            0.0,
            None,
            1000,
            LinkStatus.OK,
            "",
            10,
        )
    ]
    table = RoutingTable(pools, links)
    for limit in (1, 5, 10, 199, 200, 1000):
        got = resolve(table, Request(WorkloadKind.TRAINING, "Tokyo", limit=limit), ScoringPolicy())
        assert [c.site for c in got.candidates] == [f"osa-{i}" for i in range(min(limit, 200))]


def test_answers_stay_exact_while_the_caches_churn_past_their_bounds() -> None:
    rng = random.Random(99)
    pools, links = view(rng)
    while len({p.region for p in pools}) < 2:
        pools, links = view(rng)
    fast, oracle = RoutingTable(pools, links), OracleTable(pools, links)
    origin = fast.regions[0]
    # Distinct network limits and CU asks: more verdicts and counted-line sets than the caches hold.
    for i in range(600):
        asked = Request(
            WorkloadKind.TRAINING,
            origin,
            max_rtt_ms=50.0 + i * 0.5,
            cu=float(i % 300),
            models=frozenset(MODELS[: 1 + i % 3]),
        )
        assert resolve(fast, asked, POLICIES[0]) == oracle_resolve(oracle, asked, POLICIES[0]), asked
