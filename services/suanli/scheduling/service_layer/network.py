"""The network view the cycle places against, kept from the routing service's full-state
`NetworkLinkChanged` records on `network.links` (the latest state per link; a lost or repeated record
heals with the next one).

Placement reads region pairs: records of scope 'region' (routing's summary of every site path between two
regions). Site-scope records carry nothing placement reads and are skipped. The view survives routing
being down: the scheduler keeps placing from the last snapshot, and `age_s()` (exported as a metric) says
how long ago it last changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from suanli.clock import Clock, to_ms
from suanli.scheduling.domain.network import EMPTY_NETWORK, LinkStatus, NetworkSnapshot, RegionLink

REGION_SCOPE = "region"
SITE_SCOPE = "site"


def _number(record: Mapping[str, Any], key: str) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"NetworkLinkChanged {key} must be a finite number, got {value!r}")
    return float(value)


def link_of(record: Mapping[str, Any]) -> RegionLink:
    """A region-scope record as a link; ValueError names what is wrong with a malformed one."""
    status = str(record.get("status") or "UNKNOWN")
    if status not in LinkStatus.__members__:
        raise ValueError(f"NetworkLinkChanged status {status!r} is not one of {list(LinkStatus.__members__)}")
    bandwidth = record.get("bandwidth_mbps")
    probed = record.get("last_probe_at")
    return RegionLink(
        src=str(record.get("src_region") or ""),
        dst=str(record.get("dst_region") or ""),
        rtt_ms=_number(record, "rtt_ms"),
        loss_ratio=_number(record, "loss_ratio"),
        bandwidth_mbps=None if bandwidth is None else _number(record, "bandwidth_mbps"),
        status=LinkStatus[status],
        last_probe_ms=to_ms(probed) if isinstance(probed, datetime) else 0,
        reason=str(record.get("reason") or ""),
    )


class NetworkView:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._links: dict[tuple[str, str], RegionLink] = {}
        self._snapshot: NetworkSnapshot = EMPTY_NETWORK
        self._stale = False
        self._changed_at: datetime | None = None

    def on_link(self, record: Mapping[str, Any]) -> bool:
        """Apply one record; True when the view changed (a new or different region link)."""
        scope = record.get("scope")
        if scope == SITE_SCOPE:
            return False
        if scope != REGION_SCOPE:
            raise ValueError(f"NetworkLinkChanged scope {scope!r} is neither 'region' nor 'site'")
        link = link_of(record)
        self._changed_at = self._clock.now()  # routing is alive, even when nothing moved
        key = (link.src, link.dst)
        if self._links.get(key) == link:
            return False
        self._links[key] = link
        self._stale = True
        return True

    def snapshot(self) -> NetworkSnapshot:
        """The current view as an immutable snapshot; the same object until a link changes."""
        if self._stale:
            self._snapshot = NetworkSnapshot(self._links.values())
            self._stale = False
        return self._snapshot

    def age_s(self) -> float | None:
        """Seconds since the last record arrived; None before the first (no network view yet)."""
        if self._changed_at is None:
            return None
        return max(0.0, (self._clock.now() - self._changed_at).total_seconds())
