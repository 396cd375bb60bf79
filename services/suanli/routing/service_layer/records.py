"""`LinkState` to and from the `NetworkLinkChanged` record (the contract on ``network.links``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from suanli.clock import from_ms, to_ms
from suanli.contracts import new_envelope
from suanli.routing.domain.links import LinkState, LinkStatus

EVENT = "NetworkLinkChanged"


def link_record(state: LinkState, *, producer: str, event_id: str, at: datetime) -> dict[str, Any]:
    return {
        **new_envelope(producer, state.link_id, event_id=event_id, occurred_at=at),
        "link_id": state.link_id,
        "scope": state.scope,
        "src_region": state.src_region,
        "src_site": state.src_site,
        "dst_region": state.dst_region,
        "dst_site": state.dst_site,
        "rtt_ms": state.rtt_ms,
        "jitter_p95_ms": state.jitter_p95_ms,
        "loss_ratio": state.loss_ratio,
        "bandwidth_mbps": state.bandwidth_mbps,
        "last_probe_at": from_ms(state.last_probe_ms),
        "status": state.status.value,
        "reason": state.reason,
        "rounds": state.rounds,
        "baseline_rtt_ms": state.baseline_rtt_ms,
    }


def link_state(record: Mapping[str, Any]) -> LinkState:
    """The state a decoded record carries; the jitter window restarts from its p95."""
    rtt = float(record["rtt_ms"])
    return LinkState(
        link_id=record["link_id"],
        scope=record["scope"],
        src_region=record["src_region"],
        src_site=record["src_site"],
        dst_region=record["dst_region"],
        dst_site=record["dst_site"],
        rtt_ms=rtt,
        # Version 1 did not carry the baseline: the RTT it reported is the best guess.
        baseline_rtt_ms=float(record.get("baseline_rtt_ms") or rtt),
        jitters=(float(record["jitter_p95_ms"]),),
        loss_ratio=float(record["loss_ratio"]),
        bandwidth_mbps=record.get("bandwidth_mbps"),
        last_probe_ms=to_ms(record["last_probe_at"]),
        status=LinkStatus(record["status"]),
        reason=record.get("reason") or "",
        rounds=int(record.get("rounds") or 0),
    )
