"""Resolve as a use case: check the request against what the views know, score over a cached table.

The `RoutingTable` is rebuilt only when the capacity or the network view changed since the last
resolve, so a resolve between changes costs only the scoring itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suanli.clock import Clock
from suanli.errors import InvalidArgument
from suanli.resources.pricebook import PriceBook
from suanli.routing.domain.scoring import (
    Request,
    Resolution,
    RoutingTable,
    ScoringPolicy,
    UnknownRegion,
    WorkloadKind,
    resolve,
)
from suanli.routing.service_layer.capacity import CapacityState
from suanli.routing.service_layer.network import NetworkState

MAX_LIMIT = 1000
SPELLINGS_KEPT = 256


class InvalidRequest(InvalidArgument):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@dataclass(frozen=True, slots=True)
class ResolveQuery:
    """What a caller asks (the RPC's fields, in the API's units)."""

    kind: str
    from_region: str
    max_rtt_ms: float = 0.0
    min_bandwidth_gbps: float = 0.0
    gpu_models: tuple[str, ...] = ()
    cu: float = 0.0
    max_price_per_hour: float = 0.0
    limit: int = 0
    tenant: str = ""
    explain: int = 0


DEFAULT_LIMIT = 10
_LIMITS = ("max_rtt_ms", "min_bandwidth_gbps", "cu", "max_price_per_hour")


class Router:
    def __init__(
        self,
        network: NetworkState,
        capacity: CapacityState,
        book: PriceBook,
        policy: ScoringPolicy,
        clock: Clock,
    ) -> None:
        self.network = network
        self.capacity = capacity
        self.book = book
        self.policy = policy
        self.clock = clock
        self._table: RoutingTable | None = None
        self._built_from: tuple[int, int] = (-1, -1)
        self._spellings: dict[str, tuple[str, bool]] = {}

    @property
    def currency(self) -> str:
        return self.book.currency

    def table(self) -> RoutingTable:
        versions = (self.network.version, self.capacity.version)
        if self._table is None or versions != self._built_from:
            pools = self.capacity.pools(self.book, self.clock.now())
            self._table = RoutingTable(pools, self.network.region_links())
            self._built_from = versions
        return self._table

    def resolve(self, query: ResolveQuery) -> Resolution:
        table = self.table()
        return resolve(table, self.request(query, table), self.policy)

    def request(self, q: ResolveQuery, table: RoutingTable) -> Request:
        try:
            kind = WorkloadKind(q.kind or WorkloadKind.TRAINING)
        except ValueError:
            raise InvalidRequest("kind", f"unknown kind {q.kind!r}; one of training, inference") from None
        if not q.from_region:
            raise InvalidRequest("from_region", "is required (the client's or the data's region)")
        if q.from_region not in table.region_index:
            raise UnknownRegion("from_region", q.from_region, table.regions)
        limits = (q.max_rtt_ms, q.min_bandwidth_gbps, q.cu, q.max_price_per_hour)
        if not all(0 <= value < math.inf for value in limits):  # NaN fails both comparisons
            for field, value in zip(_LIMITS, limits, strict=True):
                if not math.isfinite(value) or value < 0:
                    raise InvalidRequest(field, f"must be a finite number >= 0 (0: no limit), got {value!r}")
        if not 0 <= q.limit <= MAX_LIMIT:
            raise InvalidRequest("limit", f"must be in 0..{MAX_LIMIT} (0: {DEFAULT_LIMIT}), got {q.limit}")
        if not 0 <= q.explain <= MAX_LIMIT:
            raise InvalidRequest("explain", f"must be in 0..{MAX_LIMIT}, got {q.explain}")
        return Request(
            kind=kind,
            origin=q.from_region,
            max_rtt_ms=q.max_rtt_ms,
            min_bandwidth_mbps=q.min_bandwidth_gbps * 1000,
            models=self._models(q.gpu_models, table),
            cu=q.cu,
            max_price_per_hour=q.max_price_per_hour,
            limit=q.limit or DEFAULT_LIMIT,
            explain=q.explain,
        )

    def _models(self, names: tuple[str, ...], table: RoutingTable) -> frozenset[str]:
        if not names:
            return frozenset()
        out = set()
        for name in names:
            canonical, known = self._canonical(name)
            if not known and canonical not in table.models:
                listed = ", ".join(table.model_names) or "none yet"
                raise InvalidRequest(
                    "gpu_models", f"unknown GPU model {name!r}; models at the sites: {listed}"
                )
            out.add(canonical)
        return frozenset(out)

    def _canonical(self, name: str) -> tuple[str, bool]:
        # Catalogue lookups tokenise the name; callers repeat the same few spellings.
        found = self._spellings.get(name)
        if found is None:
            found = (self.capacity.canonical(name), self.capacity.known_model(name))
            # Only known models are kept, and only so many: callers choose the names they send.
            if found[1] and len(self._spellings) < SPELLINGS_KEPT:
                self._spellings[name] = found
        return found
