"""Resolve's answer written as wire bytes parses to exactly the answer built as messages."""

from __future__ import annotations

import random

from routing_oracle import OracleTable, oracle_resolve
from test_routing_fast_path import POLICIES, request, view

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.routing.domain.links import LinkStatus
from suanli.routing.domain.scoring import (
    Excluded,
    Exclusion,
    Resolution,
    RoutingTable,
    Scored,
    resolve,
)
from suanli.routing.entrypoints.answers import STATUSES, AnswerWriter


def as_messages(resolution: Resolution, currency: str) -> pb.ResolveResponse:
    """The answer built field by field, as the servicer first did."""
    return pb.ResolveResponse(
        candidates=[
            pb.Candidate(
                region=c.region,
                site=c.site,
                device_class=c.device_class,
                gpu_model=c.model,
                score=pb.Score(total=c.score, compute=c.compute, network=c.network, price=c.price),
                free_cu=c.free_cu,
                total_cu=c.total_cu,
                rtt_ms=c.rtt_ms,
                loss_ratio=c.loss_ratio,
                bandwidth_mbps=c.bandwidth_mbps or 0.0,
                link_status=STATUSES[c.link_status],
                price_per_hour=c.price_per_hour,
                currency=currency,
            )
            for c in resolution.candidates
        ],
        excluded=[
            pb.Exclusion(
                region=e.region,
                site=e.site,
                device_class=e.device_class,
                code=pb.ExclusionCode.ValueType(int(e.code)),
                reason=e.reason,
                count=e.count,
            )
            for e in resolution.excluded
        ],
        excluded_total=resolution.excluded_total,
    )


def test_random_answers_parse_to_the_message_built_answer() -> None:
    writer = AnswerWriter()
    checked = 0
    for seed in range(30):
        rng = random.Random(1000 + seed)
        pools, links = view(rng)
        table = RoutingTable(pools, links)
        if not table.regions:
            continue
        for _ in range(20):
            resolution = resolve(table, request(rng, table.regions), POLICIES[seed % 2])
            # Twice: the second time from the writer's caches.
            for _ in range(2):
                wire = writer.resolve_response(resolution, "CNY")
                assert pb.ResolveResponse.FromString(wire) == as_messages(resolution, "CNY")
            checked += len(resolution.candidates) + len(resolution.excluded)
    assert checked > 1000


def test_unicode_long_texts_large_counts_and_an_empty_answer() -> None:
    writer = AnswerWriter()
    long_reason = "延迟 " * 100  # longer than 127 bytes: a two-byte length
    resolution = Resolution(
        candidates=(
            Scored(
                "東京",
                "tok-1",
                "h100",
                "H100 SXM",
                0.5,
                0.25,
                1.0,
                0.0,
                0.0,
                8.0,
                1.0,
                0.0,
                None,
                LinkStatus.DEGRADED,
                12.5,
            ),
        ),
        excluded=(Excluded("大阪", "", "", Exclusion.CAPACITY, long_reason, 300_000),),
        excluded_total=300_000,
    )
    wire = writer.resolve_response(resolution, "")
    assert pb.ResolveResponse.FromString(wire) == as_messages(resolution, "")
    assert writer.resolve_response(Resolution((), (), 0), "CNY") == b""


def test_the_oracle_answers_encode_too() -> None:
    rng = random.Random(5)
    pools, links = view(rng)
    table = OracleTable(pools, links)
    resolution = oracle_resolve(table, request(rng, table.regions), POLICIES[0])
    wire = AnswerWriter().resolve_response(resolution, "USD")
    assert pb.ResolveResponse.FromString(wire) == as_messages(resolution, "USD")
