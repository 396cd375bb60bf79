"""The API's read view of compute: each node's latest `NodeCapacityChanged`, pooled per site and model.

Free CU is what metering reports as allocatable minus used. A node's devices are pooled under their
catalogue model (a node with mixed models adds to each pool by its devices' share of the node's CU);
a node without GPUs is a CPU pool. Prices come from the price book version in effect now, in the tier
of an ordinary (priority 0) job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.resources.pricebook import PriceBook
from suanli.routing.domain.scoring import SitePool

CPU = "cpu"


@dataclass(frozen=True, slots=True)
class _Share:
    region: str
    site: str
    device_class: str
    model: str
    free_cu: float
    total_cu: float


class CapacityState:
    def __init__(self, catalogue: DeviceCatalogue | None = None) -> None:
        self.catalogue = catalogue or default_catalogue()
        self._nodes: dict[str, tuple[int, tuple[_Share, ...]]] = {}
        self.version = 0

    def apply(self, record: Mapping[str, Any], at_ms: int) -> bool:
        """Keep the node's newest report (``at_ms``: its occurred_at); an older one is ignored."""
        node_id = str(record["node_id"])
        held = self._nodes.get(node_id)
        if held is not None and held[0] > at_ms:
            return False
        self._nodes[node_id] = (at_ms, self._shares(record))
        self.version += 1
        return True

    def canonical(self, model: str) -> str:
        return self.catalogue.lookup(model).model

    def known_model(self, model: str) -> bool:
        return self.catalogue.lookup(model).known

    def _shares(self, r: Mapping[str, Any]) -> tuple[_Share, ...]:
        free = max(0.0, float(r["cu_allocatable"]) - float(r["cu_used"]))
        total = float(r["cu_allocatable"])
        region, site = str(r["region"]), str(r.get("site") or r.get("zone") or r["node_id"])
        devices = list(r.get("devices") or ())
        if not devices or total <= 0:
            return (_Share(region, site, CPU, CPU, free, total),)
        weight: dict[tuple[str, str], float] = {}
        for d in devices:
            key = (str(d["device_class"]), self.canonical(str(d["model"])))
            weight[key] = weight.get(key, 0.0) + float(d["cu"])
        whole = sum(weight.values()) or 1.0
        return tuple(
            _Share(region, site, cls, model, free * w / whole, total * w / whole)
            for (cls, model), w in sorted(weight.items())
        )

    def pools(self, book: PriceBook, at: datetime) -> list[SitePool]:
        grouped: dict[tuple[str, str, str, str], list[float]] = {}
        for _, shares in self._nodes.values():
            for s in shares:
                sums = grouped.setdefault((s.region, s.site, s.device_class, s.model), [0.0, 0.0])
                sums[0] += s.free_cu
                sums[1] += s.total_cu
        version = book.version_at(at)
        tier = book.tier_for(0)
        # One price-book lookup per (device class, region), not per site: the table is rebuilt from
        # here whenever a node reports.
        rates: dict[tuple[str, str], float | None] = {}
        out = []
        for (region, site, cls, model), (free, total) in sorted(grouped.items()):
            if (cls, region) not in rates:
                rate = version.rate_for(cls, region, tier) if version is not None else None
                rates[(cls, region)] = None if rate is None else float(rate.cu_hour)
            out.append(SitePool(region, site, cls, model, free, total, rates[(cls, region)]))
        return out
