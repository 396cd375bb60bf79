"""A LinkMeasured record into a Probe, and the precise refusal of one that cannot be a probe round."""

from __future__ import annotations

from typing import Any

import pytest

from suanli.contracts import decode, encode
from suanli.routing.domain.probes import InvalidProbe, occurred_ms, probe_from_record
from suanli.routing.testing import link_measured


def record(**changes: Any) -> dict[str, Any]:
    return {
        **decode(encode("LinkMeasured", link_measured(("Tokyo", "tok-1"), ("Osaka", "osa-1"), 5000)))[1],
        **changes,
    }


def test_a_decoded_record_is_a_probe_at_its_occurred_at() -> None:
    r = record(bandwidth_mbps=900.0)
    p = probe_from_record(r, occurred_ms(r["occurred_at"]))
    assert (p.link_id, p.src_region, p.dst_region, p.at_ms, p.bandwidth_mbps) == (
        "tok-1->osa-1",
        "Tokyo",
        "Osaka",
        5000,
        900.0,
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"src_site": ""}, "LinkMeasured.src_site: is required"),
        ({"dst_region": " "}, "LinkMeasured.dst_region: is required"),
        ({"dst_site": "tok-1"}, "LinkMeasured.dst_site: equals src_site 'tok-1': a path needs two ends"),
        ({"rtt_ms": -1.0}, "LinkMeasured.rtt_ms: must be a finite number >= 0, got -1.0"),
        ({"jitter_ms": float("nan")}, "LinkMeasured.jitter_ms: must be a finite number >= 0, got nan"),
        ({"loss_ratio": 1.5}, "LinkMeasured.loss_ratio: must be at most 1, got 1.5"),
        (
            {"bandwidth_mbps": float("inf")},
            "LinkMeasured.bandwidth_mbps: must be a finite number >= 0, got inf",
        ),
        ({"samples": 0}, "LinkMeasured.samples: must be at least 1, got 0"),
    ],
)
def test_figures_out_of_range_are_refused_naming_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidProbe) as caught:
        probe_from_record(record(**changes), 5000)
    assert str(caught.value) == message


def test_a_naive_occurred_at_is_refused() -> None:
    from datetime import datetime

    with pytest.raises(InvalidProbe, match="occurred_at"):
        occurred_ms(datetime(2026, 1, 1))
