"""Resolve: rank the sites that can take a workload by compute, network and price (pure, vectorised).

The score follows the IETF CATS metric model (draft-ietf-cats-metric-definition): each candidate's raw
figures (free CU, RTT, loss, price) are normalised into one metric per category, 0..1 and higher is
better (the draft's "level 1"), and those are combined with the workload kind's weights into one
comparable value (its "level 2"):

    compute = headroom after placing the request: (free CU - CU needed) / total CU
    network = 1 / (1 + RTT / rtt_ref) x (1 - loss)        (a path of rtt_ref ms scores 0.5)
    price   = cheapest fitting price / this price         (1 for the cheapest)
    score   = w_compute x compute + w_network x network + w_price x price   (weights sum to 1)

A candidate is one site's pool of one device model: `RoutingTable` holds them as arrays together with
the region-pair network matrix, so one resolve is a handful of numpy operations over every candidate.
Candidates that cannot take the request are excluded with the first reason that applies, network
reasons (per region pair) before site reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

import numpy as np
import numpy.typing as npt

from suanli.errors import InvalidArgument
from suanli.routing.domain.links import LinkState, LinkStatus

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

_STATUS_CODES: dict[LinkStatus, int] = {s: i for i, s in enumerate(LinkStatus)}
_UNKNOWN, _OK, _DOWN = (_STATUS_CODES[s] for s in (LinkStatus.UNKNOWN, LinkStatus.OK, LinkStatus.DOWN))
_STATUSES = tuple(LinkStatus)


class WorkloadKind(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"


class Exclusion(IntEnum):
    """Why a candidate cannot take the request; the first that applies, in this order."""

    NONE = 0
    LINK_DOWN = 1
    NO_PATH = 2
    RTT = 3
    BANDWIDTH = 4
    GPU_MODEL = 5
    CAPACITY = 6
    NO_PRICE = 7
    PRICE = 8


class UnknownRegion(InvalidArgument):
    def __init__(self, field: str, region: str, known: Iterable[str]) -> None:
        names = ", ".join(sorted(known)) or "none yet"
        super().__init__(f"{field}: unknown region {region!r}; known regions: {names}")


@dataclass(frozen=True, slots=True)
class Weights:
    compute: float
    network: float
    price: float

    def __post_init__(self) -> None:
        parts = (self.compute, self.network, self.price)
        if min(parts) < 0 or sum(parts) <= 0:
            raise ValueError(f"weights must be >= 0 and not all 0, got {parts}")

    def normalised(self) -> tuple[float, float, float]:
        total = self.compute + self.network + self.price
        return self.compute / total, self.network / total, self.price / total


@dataclass(frozen=True, slots=True)
class ScoringPolicy:
    training: Weights = Weights(0.5, 0.2, 0.3)
    inference: Weights = Weights(0.3, 0.5, 0.2)
    rtt_ref_ms: float = 50.0
    # The origin region's own sites are reachable without a measured region summary (at this RTT, with
    # no bandwidth limit); a measured summary of the pair replaces the assumption.
    intra_region_rtt_ms: float = 1.0

    def weights(self, kind: WorkloadKind) -> Weights:
        return self.training if kind is WorkloadKind.TRAINING else self.inference


@dataclass(frozen=True, slots=True)
class SitePool:
    """One site's capacity of one device model (``model`` is the catalogue's canonical name)."""

    region: str
    site: str
    device_class: str
    model: str
    free_cu: float
    total_cu: float
    rate_per_cu_hour: float | None


@dataclass(frozen=True, slots=True)
class Request:
    kind: WorkloadKind
    origin: str
    max_rtt_ms: float = 0.0  # 0: no limit (likewise below)
    min_bandwidth_mbps: float = 0.0
    models: frozenset[str] = frozenset()  # canonical model names; empty: any
    cu: float = 0.0
    max_price_per_hour: float = 0.0
    limit: int = 10
    excluded_limit: int = 50

    @property
    def priced_cu(self) -> float:
        # Prices are per hour of the CU asked for; a request for no particular amount is priced per CU.
        return self.cu if self.cu > 0 else 1.0


@dataclass(frozen=True, slots=True)
class Scored:
    region: str
    site: str
    device_class: str
    model: str
    score: float
    compute: float
    network: float
    price: float
    free_cu: float
    total_cu: float
    rtt_ms: float
    loss_ratio: float
    bandwidth_mbps: float | None
    link_status: LinkStatus
    price_per_hour: float


@dataclass(frozen=True, slots=True)
class Excluded:
    """An excluded candidate; ``site`` and ``device_class`` are empty when a whole region is out."""

    region: str
    site: str
    device_class: str
    code: Exclusion
    reason: str


@dataclass(frozen=True, slots=True)
class Resolution:
    candidates: tuple[Scored, ...]
    excluded: tuple[Excluded, ...]
    excluded_total: int  # candidate pools excluded, all reasons (``excluded`` may list fewer)


class RoutingTable:
    """Candidate pools and the region-pair matrix as arrays over one region index."""

    def __init__(self, pools: Sequence[SitePool], region_links: Iterable[LinkState]) -> None:
        links = list(region_links)
        names = {p.region for p in pools} | {x for s in links for x in s.region_pair}
        self.regions: tuple[str, ...] = tuple(sorted(names))
        self.region_index = {r: i for i, r in enumerate(self.regions)}
        self.pools = tuple(pools)
        self.models = frozenset(p.model for p in pools)
        self.region: Ints = np.array([self.region_index[p.region] for p in pools], dtype=np.int64)
        self.free_cu: Floats = np.array([p.free_cu for p in pools], dtype=np.float64)
        self.total_cu: Floats = np.array([p.total_cu for p in pools], dtype=np.float64)
        rates = [np.nan if p.rate_per_cu_hour is None else p.rate_per_cu_hour for p in pools]
        self.rate: Floats = np.array(rates, dtype=np.float64)
        model_names = sorted(self.models)
        self._model_index = {m: i for i, m in enumerate(model_names)}
        self.model: Ints = np.array([self._model_index[p.model] for p in pools], dtype=np.int64)
        n = len(self.regions)
        self.rtt: Floats = np.zeros((n, n))
        self.loss: Floats = np.zeros((n, n))
        self.bandwidth: Floats = np.full((n, n), np.nan)
        self.status: Ints = np.full((n, n), _UNKNOWN, dtype=np.int64)
        self.reasons: dict[tuple[int, int], str] = {}
        for s in links:
            i, j = self.region_index[s.src_region], self.region_index[s.dst_region]
            self.rtt[i, j], self.loss[i, j] = s.rtt_ms, s.loss_ratio
            self.bandwidth[i, j] = np.nan if s.bandwidth_mbps is None else s.bandwidth_mbps
            self.status[i, j] = _STATUS_CODES[s.status]
            self.reasons[(i, j)] = s.reason

    def model_codes(self, models: frozenset[str]) -> Ints:
        return np.array([self._model_index[m] for m in models if m in self._model_index], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class _Paths:
    """The origin's row of the matrix, with its own region reachable."""

    rtt: Floats
    loss: Floats
    bandwidth: Floats
    status: Ints


def _paths(table: RoutingTable, o: int, policy: ScoringPolicy) -> _Paths:
    rtt, loss = table.rtt[o].copy(), table.loss[o].copy()
    bandwidth, status = table.bandwidth[o].copy(), table.status[o].copy()
    if status[o] == _UNKNOWN:
        # Unmeasured inside the origin region: near by assumption, and no bandwidth limit applies.
        rtt[o], loss[o], status[o], bandwidth[o] = policy.intra_region_rtt_ms, 0.0, _OK, np.inf
    return _Paths(rtt, loss, bandwidth, status)


def _region_codes(paths: _Paths, request: Request) -> Ints:
    conditions = [paths.status == _DOWN, paths.status == _UNKNOWN]
    choices = [Exclusion.LINK_DOWN, Exclusion.NO_PATH]
    if request.max_rtt_ms > 0:
        conditions.append(paths.rtt > request.max_rtt_ms)
        choices.append(Exclusion.RTT)
    if request.min_bandwidth_mbps > 0:
        # An unmeasured bandwidth cannot be promised.
        conditions.append(~(paths.bandwidth >= request.min_bandwidth_mbps))
        choices.append(Exclusion.BANDWIDTH)
    return np.select(conditions, [int(c) for c in choices], 0).astype(np.int64)


def _pool_codes(table: RoutingTable, request: Request, region_codes: Ints) -> tuple[Ints, Floats]:
    price = table.rate * request.priced_cu
    conditions = []
    choices = []
    if request.models:
        conditions.append(~np.isin(table.model, table.model_codes(request.models)))
        choices.append(Exclusion.GPU_MODEL)
    conditions += [table.free_cu < request.cu, np.isnan(price)]
    choices += [Exclusion.CAPACITY, Exclusion.NO_PRICE]
    if request.max_price_per_hour > 0:
        conditions.append(price > request.max_price_per_hour)
        choices.append(Exclusion.PRICE)
    site = np.select(conditions, [int(c) for c in choices], 0)
    by_region = region_codes[table.region]
    return np.where(by_region != 0, by_region, site).astype(np.int64), price


def resolve(table: RoutingTable, request: Request, policy: ScoringPolicy) -> Resolution:
    """The best ``request.limit`` candidates, best first, and why the others were excluded."""
    o = table.region_index.get(request.origin)
    if o is None:
        raise UnknownRegion("from_region", request.origin, table.regions)
    paths = _paths(table, o, policy)
    region_codes = _region_codes(paths, request)
    codes, price = _pool_codes(table, request, region_codes)
    fit = np.flatnonzero(codes == 0)
    candidates = _ranked(table, request, policy, paths, fit, price)
    excluded = _excluded(table, request, paths, region_codes, codes, price)
    return Resolution(candidates, excluded, int(codes.size - fit.size))


def _ranked(
    table: RoutingTable,
    request: Request,
    policy: ScoringPolicy,
    paths: _Paths,
    fit: Ints,
    price: Floats,
) -> tuple[Scored, ...]:
    if fit.size == 0 or request.limit <= 0:
        return ()
    region = table.region[fit]
    total_cu = table.total_cu[fit]
    headroom = np.divide(
        table.free_cu[fit] - request.cu, total_cu, out=np.zeros(fit.size), where=total_cu > 0
    )
    compute = np.clip(headroom, 0.0, 1.0)
    rtt, loss = paths.rtt[region], paths.loss[region]
    network = (1.0 / (1.0 + rtt / policy.rtt_ref_ms)) * (1.0 - loss)
    fit_price = price[fit]
    cheapest = fit_price.min()
    price_score = np.divide(cheapest, fit_price, out=np.ones(fit.size), where=fit_price > 0)
    wc, wn, wp = policy.weights(request.kind).normalised()
    score = wc * compute + wn * network + wp * price_score
    k = min(request.limit, fit.size)
    top = np.sort(np.argpartition(-score, k - 1)[:k]) if k < fit.size else np.arange(fit.size)
    order = top[np.argsort(-score[top], kind="stable")]
    out = []
    for i in order.tolist():
        pool = table.pools[int(fit[i])]
        r = int(region[i])
        bandwidth = float(paths.bandwidth[r])
        out.append(
            Scored(
                region=pool.region,
                site=pool.site,
                device_class=pool.device_class,
                model=pool.model,
                score=float(score[i]),
                compute=float(compute[i]),
                network=float(network[i]),
                price=float(price_score[i]),
                free_cu=pool.free_cu,
                total_cu=pool.total_cu,
                rtt_ms=float(rtt[i]),
                loss_ratio=float(loss[i]),
                bandwidth_mbps=bandwidth if np.isfinite(bandwidth) else None,
                link_status=_STATUSES[int(paths.status[r])],
                price_per_hour=float(fit_price[i]),
            )
        )
    return tuple(out)


def _excluded(
    table: RoutingTable,
    request: Request,
    paths: _Paths,
    region_codes: Ints,
    codes: Ints,
    price: Floats,
) -> tuple[Excluded, ...]:
    out: list[Excluded] = []
    o = table.region_index[request.origin]
    present = np.unique(table.region)
    for r in present[region_codes[present] != 0].tolist():
        code = Exclusion(int(region_codes[r]))
        reason = _region_reason(table, request, paths, o, r, code)
        out.append(Excluded(table.regions[r], "", "", code, reason))
    site_level = np.flatnonzero(codes >= Exclusion.GPU_MODEL)
    for i in site_level[: max(0, request.excluded_limit - len(out))].tolist():
        pool = table.pools[i]
        code = Exclusion(int(codes[i]))
        out.append(
            Excluded(
                pool.region, pool.site, pool.device_class, code, _pool_reason(pool, request, code, price[i])
            )
        )
    return tuple(out)


def _region_reason(
    table: RoutingTable, request: Request, paths: _Paths, o: int, r: int, code: Exclusion
) -> str:
    path = f"{request.origin}->{table.regions[r]}"
    if code is Exclusion.LINK_DOWN:
        return f"path {path} is DOWN: {table.reasons.get((o, r)) or 'no reason given'}"
    if code is Exclusion.NO_PATH:
        return f"no network measurement on {path}"
    if code is Exclusion.RTT:
        return f"rtt {paths.rtt[r]:.1f} ms on {path} > max_rtt_ms {request.max_rtt_ms:g}"
    bandwidth = paths.bandwidth[r]
    measured = "not measured" if np.isnan(bandwidth) else f"{bandwidth / 1000:.2f} Gbps"
    return f"bandwidth on {path} {measured} < min_bandwidth_gbps {request.min_bandwidth_mbps / 1000:g}"


def _pool_reason(pool: SitePool, request: Request, code: Exclusion, price: float) -> str:
    if code is Exclusion.GPU_MODEL:
        return f"gpu model {pool.model} not in gpu_models {sorted(request.models)}"
    if code is Exclusion.CAPACITY:
        return f"free {pool.free_cu:.1f} CU < cu {request.cu:g}"
    if code is Exclusion.NO_PRICE:
        return f"the price book has no rate for {pool.device_class} in {pool.region}"
    return f"price {price:.4f}/h > max_price_per_hour {request.max_price_per_hour:g}"
