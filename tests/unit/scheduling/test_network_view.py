"""The scheduler's network view: region summaries from network.links into snapshots, garbage refused with
a reason (the bus dead-letters it), the view's age, and the price book the scheduler reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from suanli.clock import ManualClock
from suanli.scheduling.adapters.pricebook import load_prices, prices_from
from suanli.scheduling.domain.network import EMPTY_NETWORK, LinkStatus
from suanli.scheduling.service_layer.network import NetworkView

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(src: str = "osaka", dst: str = "tokyo", **fields: Any) -> dict[str, Any]:
    return {
        "link_id": f"region:{src}->{dst}",
        "scope": "region",
        "src_region": src,
        "dst_region": dst,
        "src_site": "",
        "dst_site": "",
        "rtt_ms": 8.2,
        "jitter_p95_ms": 0.4,
        "loss_ratio": 0.0,
        "bandwidth_mbps": None,
        "last_probe_at": T0,
        "status": "OK",
        "reason": "",
        **fields,
    }


def test_region_summaries_make_the_snapshot_and_site_paths_are_skipped() -> None:
    clock = ManualClock(T0)
    view = NetworkView(clock)
    assert view.snapshot() is EMPTY_NETWORK and view.age_s() is None
    assert view.on_link(record())
    assert not view.on_link(record())  # the same state again changes nothing
    assert not view.on_link(
        record("osaka", "tokyo", scope="site", src_site="os-a", dst_site="tk-b", rtt_ms=99.0)
    )
    first = view.snapshot()
    assert first is view.snapshot()  # unchanged view, same snapshot object
    assert first.path("osaka", "tokyo") == (8.2, None, LinkStatus.OK)
    assert view.on_link(record(status="DOWN", reason="no probe for 31 s"))
    assert view.snapshot().path("osaka", "tokyo")[2] is LinkStatus.DOWN
    assert view.snapshot().last_probe_ms == int(T0.timestamp() * 1000)


def test_the_age_keeps_growing_while_routing_is_silent_and_the_view_is_kept() -> None:
    clock = ManualClock(T0)
    view = NetworkView(clock)
    view.on_link(record())
    clock.advance(timedelta(seconds=42))
    assert view.age_s() == 42.0
    assert view.snapshot().path("osaka", "tokyo")[0] == 8.2  # still placing from the last view
    view.on_link(record())  # routing is back: an unchanged record still says the view is fresh
    assert view.age_s() == 0.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope": "planet"}, "scope 'planet' is neither 'region' nor 'site'"),
        ({"status": "SIDEWAYS"}, "status 'SIDEWAYS' is not one of"),
        ({"rtt_ms": -3.0}, "rtt_ms must be a finite number >= 0"),
        ({"rtt_ms": "fast"}, "rtt_ms must be a finite number"),
        ({"loss_ratio": 2.0}, "loss_ratio must be 0..1"),
        ({"src_region": ""}, "a link needs a source and a destination region"),
    ],
)
def test_garbage_is_refused_with_the_reason(fields: dict[str, Any], message: str) -> None:
    view = NetworkView(ManualClock(T0))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        view.on_link(record(**fields))
    assert view.snapshot() is EMPTY_NETWORK


def test_the_price_book_gives_the_standard_rates_of_the_version_in_effect() -> None:
    book = {
        "currency": "CNY",
        "versions": [
            {"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "*", "cu_hour": "0.02"}]},
            {
                "effective_from": "2025-07-01T00:00:00Z",
                "rates": [
                    {"device_class": "*", "cu_hour": "0.018"},
                    {"device_class": "h200", "region": "west", "cu_hour": "0.009"},
                    {"device_class": "*", "tier": "high", "cu_hour": "0.5"},
                ],
            },
        ],
    }
    early = prices_from(book, datetime(2025, 3, 1, tzinfo=UTC))
    assert early.cu_hour("h200", "west") == 0.02
    now = prices_from(book, T0)
    assert (now.cu_hour("h200", "west"), now.cu_hour("h200", "east"), now.currency) == (0.009, 0.018, "CNY")
    assert not prices_from(book, datetime(2024, 1, 1, tzinfo=UTC))  # nothing in effect yet


def test_the_packaged_price_book_loads_and_a_broken_one_is_left_out(tmp_path: Path) -> None:
    assert load_prices(T0).model_cu_hour("NVIDIA H200", "sao-paulo") == 0.009
    broken = tmp_path / "book.yaml"
    broken.write_text("versions: [{effective_from: soon}]")
    assert not load_prices(T0, broken)
