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

Speed (a resolve is ~30 array operations and no per-pool Python): the table is built once per view
version and caches what depends on the views and on request fields that repeat: per origin its matrix
row, network scores and weights; per (origin, max RTT, min bandwidth) the regions excluded with their
reasons; per GPU-model set each pool's key. A pool's key is region x 16 + one bit per failed site
check, so one `bincount` gives every (region, reason) count; scores are computed for all pools at
once; the top ``limit`` come from a bound on the blocks' minima instead of a sort, equal scores in pool
order. `tests/unit/routing/routing_oracle.py` keeps the straightforward version the answers are
compared with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from suanli.errors import InvalidArgument
from suanli.routing.domain.links import LinkState, LinkStatus

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

_STATUS_CODES: dict[LinkStatus, int] = {s: i for i, s in enumerate(LinkStatus)}
_UNKNOWN, _OK, _DOWN = (_STATUS_CODES[s] for s in (LinkStatus.UNKNOWN, LinkStatus.OK, LinkStatus.DOWN))
_STATUSES = tuple(LinkStatus)
K = TypeVar("K")
V = TypeVar("V")


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


class SitePool(NamedTuple):
    """One site's capacity of one device model (``model`` is the catalogue's canonical name).

    A named tuple: the table is rebuilt from a thousand of these whenever a node reports."""

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
    # Pool-level exclusions one by one (at most this many) instead of one line per region and reason.
    explain: int = 0

    @property
    def priced_cu(self) -> float:
        # Prices are per hour of the CU asked for; a request for no particular amount is priced per CU.
        return self.cu if self.cu > 0 else 1.0


class Scored(NamedTuple):
    # A named tuple rather than a dataclass: a resolve builds up to ``limit`` of them, and a tuple
    # is the cheapest immutable record to build.
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


_scored = Scored._make  # from one tuple: half the cost of the keyword constructor


@dataclass(frozen=True, slots=True)
class Excluded:
    """Candidates excluded for one reason: a whole region (network reasons), the pools of a region that
    fail a site check (``count`` of them), or, when the request asks to explain, one pool.

    Resolves repeat these: the table caches them per network verdict and per tally."""

    region: str
    site: str
    device_class: str
    code: Exclusion
    reason: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class Resolution:
    candidates: tuple[Scored, ...]
    excluded: tuple[Excluded, ...]
    excluded_total: int  # candidate pools excluded, all reasons (``excluded`` may list fewer)


# A pool's site checks as bits of its key (region x _GROUPS + bits); the highest bit set is the first
# reason that applies, so one key per pool says both where it is and why it fails.
_GROUPS = 16
_PRICE_BIT, _NO_PRICE_BIT, _CAPACITY_BIT, _MODEL_BIT = 1, 2, 4, 8
_SITE_CODES = (Exclusion.GPU_MODEL, Exclusion.CAPACITY, Exclusion.NO_PRICE, Exclusion.PRICE)
_BIT_CODES = tuple(
    Exclusion.NONE if bits == 0 else _SITE_CODES[0 if bits & 8 else 1 if bits & 4 else 2 if bits & 2 else 3]
    for bits in range(_GROUPS)
)
# bits -> tally column: 0 for the pools that pass every site check, 1.. for each site code in order.
_COLUMNS = 1 + len(_SITE_CODES)
_COLUMN_OF_BITS = tuple(0 if c is Exclusion.NONE else 1 + _SITE_CODES.index(c) for c in _BIT_CODES)
# Caches keyed by what requests ask are dropped whole past these sizes (they refill from what is
# asked), which bounds a table's memory whatever the requests: verdicts per origin and GPU-model sets
# (arrays each), counted lines (tuples of lines).
_SMALL_CACHE = 256
_GROUP_CACHE = 4096
_BLOCK = 16


@dataclass(frozen=True, slots=True)
class _Verdict:
    """The network checks of one origin and constraint pair: the regions excluded (as answered), the
    present regions that pass, and which pool keys fit (a region that passes, no site bit set)."""

    excluded: tuple[Excluded, ...]
    passing_names: tuple[str, ...]
    fits: npt.NDArray[np.bool_]
    site_excluded: npt.NDArray[np.bool_]
    # Pool key -> its tally bin: passing region p's pools at p x _COLUMNS + column (0: fits, 1..: the
    # site codes in order), every other pool in the last bin.
    tally_bins: Ints


@dataclass(frozen=True, slots=True)
class _Origin:
    """What one origin region sees: its row of the matrix (its own region reachable), as lists for
    per-candidate reads, and the network score per region and per pool."""

    policy: ScoringPolicy
    rtt: list[float]
    loss: list[float]
    bandwidth: list[float]
    status: list[int]
    network: list[float]
    pool_network: Floats
    # Per workload kind: the compute and price weights, and the network score weighted per pool.
    weights: dict[WorkloadKind, tuple[float, float, Floats]]
    # Its network checks per (max RTT, min bandwidth) asked.
    verdicts: dict[tuple[float, float], _Verdict] = field(default_factory=dict)


class RoutingTable:
    """Candidate pools and the region-pair matrix as arrays over one region index.

    Built once per view version; everything a resolve needs that depends on the views alone (and on
    request fields that repeat: origin, network limits, GPU models) is cached on it.
    """

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
        self.unpriced = np.isnan(self.rate)
        with np.errstate(divide="ignore"):
            self.inverse_total: Floats = np.where(self.total_cu > 0, 1.0 / self.total_cu, 0.0)
        # The compute score of a request for no particular amount (CU needed 0) does not depend on it.
        self.headroom: Floats = np.clip(self.free_cu * self.inverse_total, 0.0, 1.0)
        self.free_rates = bool((self.rate == 0).any())
        # Where each block of _BLOCK pools starts (the top-k selection bounds its search with them).
        self.blocks: Ints = np.arange(0, len(self.pools), _BLOCK, dtype=np.int64)
        self.model_names = tuple(sorted(self.models))
        self._model_index = {m: i for i, m in enumerate(self.model_names)}
        self.model: Ints = np.array([self._model_index[p.model] for p in pools], dtype=np.int64)
        self.present = np.unique(self.region) if pools else np.zeros(0, dtype=np.int64)
        self.region_sizes: list[int] = np.bincount(self.region, minlength=len(names)).tolist()
        self._key_base: Ints = self.region * _GROUPS + self.unpriced * _NO_PRICE_BIT
        self._model_keys: dict[frozenset[str], Ints] = {}
        self._origins: dict[int, _Origin] = {}
        self._groups: dict[tuple[object, ...], tuple[Excluded, ...]] = {}
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
        # Per-candidate reads from lists: cheaper than indexing arrays one element at a time.
        self.rates: list[float] = self.rate.tolist()
        self.regions_of: list[int] = self.region.tolist()

    def model_keys(self, models: frozenset[str]) -> Ints:
        """Each pool's key with the GPU-model and price-book bits set (cached per model set)."""
        keys = self._model_keys.get(models)
        if keys is None:
            keys = self._key_base
            if models:
                wanted = [self._model_index[m] for m in models if m in self._model_index]
                other = ~np.isin(self.model, np.array(wanted, dtype=np.int64))
                keys = keys + other * _MODEL_BIT
            _bounded(self._model_keys, _SMALL_CACHE)[models] = keys
        return keys

    def origin(self, o: int, policy: ScoringPolicy) -> _Origin:
        seen = self._origins.get(o)
        if seen is not None and (seen.policy is policy or seen.policy == policy):
            return seen
        rtt, loss = self.rtt[o].copy(), self.loss[o].copy()
        bandwidth, status = self.bandwidth[o].copy(), self.status[o].copy()
        if status[o] == _UNKNOWN:
            # Unmeasured inside the origin region: near by assumption, and no bandwidth limit applies.
            rtt[o], loss[o], status[o], bandwidth[o] = policy.intra_region_rtt_ms, 0.0, _OK, np.inf
        network = (1.0 - loss) / (1.0 + rtt / policy.rtt_ref_ms)
        pool_network = network[self.region]
        weights = {}
        for kind in WorkloadKind:
            wc, wn, wp = policy.weights(kind).normalised()
            weights[kind] = (wc, wp, wn * pool_network)
        seen = _Origin(
            policy,
            rtt.tolist(),
            loss.tolist(),
            bandwidth.tolist(),
            status.tolist(),
            network.tolist(),
            pool_network,
            weights,
        )
        self._origins[o] = seen
        return seen

    def verdict(self, o: int, origin: _Origin, request: Request) -> _Verdict:
        key = (request.max_rtt_ms, request.min_bandwidth_mbps)
        seen = origin.verdicts.get(key)
        if seen is None:
            seen = _bounded(origin.verdicts, _SMALL_CACHE)[key] = self._judge(o, origin, request)
        return seen

    def _judge(self, o: int, origin: _Origin, request: Request) -> _Verdict:
        codes = [_region_code(origin, r, request) for r in range(len(self.regions))]
        present = self.present.tolist()
        excluded = tuple(
            Excluded(
                self.regions[r],
                "",
                "",
                codes[r],
                _region_reason(self, request, origin, o, r, codes[r]),
                self.region_sizes[r],
            )
            for r in present
            if codes[r] is not Exclusion.NONE
        )
        passing = [r for r in present if codes[r] is Exclusion.NONE]
        fits = np.zeros(len(self.regions) * _GROUPS, dtype=np.bool_)
        fits[np.array(passing, dtype=np.int64) * _GROUPS] = True
        site_excluded = np.zeros((len(self.regions), _GROUPS), dtype=np.bool_)
        site_excluded[passing, 1:] = True
        bins = np.full((len(self.regions), _GROUPS), len(passing) * _COLUMNS, dtype=np.int64)
        for p, r in enumerate(passing):
            bins[r] = [p * _COLUMNS + _COLUMN_OF_BITS[bits] for bits in range(_GROUPS)]
        return _Verdict(
            excluded, tuple(self.regions[r] for r in passing), fits, site_excluded.ravel(), bins.ravel()
        )

    def grouped(self, verdict: _Verdict, tally: list[int], request: Request) -> tuple[Excluded, ...]:
        """One line per passing region and site code, with the number of pools behind it."""
        key = (verdict.passing_names, tuple(tally), request.models, request.cu, request.max_price_per_hour)
        seen = self._groups.get(key)
        if seen is None:
            seen = _bounded(self._groups, _GROUP_CACHE)[key] = tuple(
                Excluded(region, "", "", code, _group_reason(request, code, n), n)
                for p, region in enumerate(verdict.passing_names)
                for code, n in zip(_SITE_CODES, tally[p * _COLUMNS + 1 : (p + 1) * _COLUMNS], strict=True)
                if n
            )
        return seen


def _bounded(cache: dict[K, V], limit: int) -> dict[K, V]:
    if len(cache) >= limit:
        cache.clear()
    return cache


def _region_code(origin: _Origin, r: int, request: Request) -> Exclusion:
    status = origin.status[r]
    if status == _DOWN:
        return Exclusion.LINK_DOWN
    if status == _UNKNOWN:
        return Exclusion.NO_PATH
    if request.max_rtt_ms > 0 and origin.rtt[r] > request.max_rtt_ms:
        return Exclusion.RTT
    # An unmeasured (NaN) bandwidth cannot be promised.
    if request.min_bandwidth_mbps > 0 and not origin.bandwidth[r] >= request.min_bandwidth_mbps:
        return Exclusion.BANDWIDTH
    return Exclusion.NONE


def resolve(table: RoutingTable, request: Request, policy: ScoringPolicy) -> Resolution:
    """The best ``request.limit`` candidates, best first (equal scores in pool order), and why the
    others were excluded."""
    o = table.region_index.get(request.origin)
    if o is None:
        raise UnknownRegion("from_region", request.origin, table.regions)
    origin = table.origin(o, policy)
    verdict = table.verdict(o, origin, request)
    keys = table.model_keys(request.models)
    cu, max_price = request.cu, request.max_price_per_hour
    price: Floats | None = None
    if cu > 0:
        keys = keys + (table.free_cu < cu) * _CAPACITY_BIT
    if max_price > 0:
        price = table.rate * request.priced_cu
        keys = keys + (price > max_price) * _PRICE_BIT
    dump = len(verdict.passing_names) * _COLUMNS
    tally: list[int] = np.bincount(verdict.tally_bins[keys], minlength=dump + 1)[:dump].tolist()
    fitting = sum(tally[::_COLUMNS])
    candidates = _ranked(table, request, origin, verdict, keys, fitting)
    if request.explain > 0:
        excluded = verdict.excluded + _explained(table, request, verdict, keys, price)
    else:
        groups = table.grouped(verdict, tally, request)
        excluded = verdict.excluded + groups if groups else verdict.excluded
    return Resolution(candidates, excluded, len(table.pools) - fitting)


def _ranked(
    table: RoutingTable, request: Request, origin: _Origin, verdict: _Verdict, keys: Ints, fitting: int
) -> tuple[Scored, ...]:
    if fitting == 0 or request.limit <= 0:
        return ()
    # Scored over every pool at once (cheaper than gathering the fitting ones first); the others get
    # an infinite cost and never reach the top ``fitting``.
    fit = verdict.fits[keys]
    cu = request.cu
    if cu != 0:
        compute = table.free_cu - cu
        compute *= table.inverse_total
        if cu < 0:
            np.maximum(compute, 0.0, out=compute)
        # (With cu > 0 a fitting pool has free CU >= cu: no headroom below 0 to clip.)
        np.minimum(compute, 1.0, out=compute)
    else:
        compute = table.headroom
    rate = table.rate
    cheapest = float(np.where(fit, rate, np.inf).min())
    # The CU needed multiplies every price alike: the ratio of rates is the ratio of prices.
    if cheapest > 0:
        if table.free_rates:
            # Free pools (none of them fits here) are left at 0 rather than divided by.
            price_score = np.divide(cheapest, rate, out=np.zeros(rate.size), where=rate != 0)
        else:
            price_score = cheapest / rate
    else:
        price_score = (rate == 0).astype(np.float64)
    wc, wp, weighted_network = origin.weights[request.kind]
    score = wc * compute
    score += weighted_network
    score += wp * price_score
    cost = np.where(fit, np.negative(score, out=score), np.inf)
    top = _top(table, cost, fit, min(request.limit, fitting), fitting)
    pcu = request.priced_cu
    rates, regions, pools = table.rates, table.regions_of, table.pools
    rtt, loss, bandwidth, status, network = (
        origin.rtt,
        origin.loss,
        origin.bandwidth,
        origin.status,
        origin.network,
    )
    out = []
    for i, negated, c in zip(top.tolist(), cost[top].tolist(), compute[top].tolist(), strict=True):
        pool, r, per_cu = pools[i], regions[i], rates[i]
        b = bandwidth[r]
        out.append(
            _scored(
                (
                    pool.region,
                    pool.site,
                    pool.device_class,
                    pool.model,
                    -negated,
                    c,
                    network[r],
                    # As the array has it (the same division), without gathering it.
                    cheapest / per_cu if cheapest > 0 else float(per_cu == 0),
                    pool.free_cu,
                    pool.total_cu,
                    rtt[r],
                    loss[r],
                    b if b == b and b != np.inf else None,  # NaN or the origin's unlimited path: unknown
                    _STATUSES[status[r]],
                    per_cu * pcu,
                )
            )
        )
    return tuple(out)


def _top(table: RoutingTable, cost: Floats, fit: npt.NDArray[np.bool_], k: int, fitting: int) -> Ints:
    """The ``k`` lowest costs, lowest first, equal costs in pool order."""
    if k >= fitting:
        chosen = fit.nonzero()[0]
    else:
        blocks = table.blocks
        if blocks.size >= 4 * k:
            # The k-th lowest of the blocks' minima bounds the k-th lowest cost from above, and far
            # fewer costs lie under it than there are pools: select those, then order them.
            minima = np.minimum.reduceat(cost, blocks)
            minima.partition(k - 1)
            bound = minima[k - 1]
        else:
            bound = cost[np.argpartition(cost, k - 1)[:k]].max()
        # An infinite bound: the fitting pools lie in too few blocks, and are few.
        chosen = (cost <= bound).nonzero()[0] if bound < np.inf else fit.nonzero()[0]
    return chosen[cost[chosen].argsort(kind="stable")[:k]]


def _explained(
    table: RoutingTable, request: Request, verdict: _Verdict, keys: Ints, price: Floats | None
) -> tuple[Excluded, ...]:
    """The first ``request.explain`` pools that fail a site check, one by one."""
    out = []
    for i in np.flatnonzero(verdict.site_excluded[keys])[: request.explain].tolist():
        pool = table.pools[i]
        code = _BIT_CODES[int(keys[i]) % _GROUPS]
        per_hour = table.rates[i] * request.priced_cu if price is None else float(price[i])
        out.append(
            Excluded(
                pool.region, pool.site, pool.device_class, code, _pool_reason(pool, request, code, per_hour)
            )
        )
    return tuple(out)


def _region_reason(
    table: RoutingTable, request: Request, origin: _Origin, o: int, r: int, code: Exclusion
) -> str:
    path = f"{request.origin}->{table.regions[r]}"
    if code is Exclusion.LINK_DOWN:
        return f"path {path} is DOWN: {table.reasons.get((o, r)) or 'no reason given'}"
    if code is Exclusion.NO_PATH:
        return f"no network measurement on {path}"
    if code is Exclusion.RTT:
        return f"rtt {origin.rtt[r]:.1f} ms on {path} > max_rtt_ms {request.max_rtt_ms:g}"
    bandwidth = origin.bandwidth[r]
    measured = "not measured" if bandwidth != bandwidth else f"{bandwidth / 1000:.2f} Gbps"
    return f"bandwidth on {path} {measured} < min_bandwidth_gbps {request.min_bandwidth_mbps / 1000:g}"


def _group_reason(request: Request, code: Exclusion, count: int) -> str:
    pools = f"{count} pool{'s' if count != 1 else ''}"
    if code is Exclusion.GPU_MODEL:
        return f"{pools} with a gpu model not in gpu_models {sorted(request.models)}"
    if code is Exclusion.CAPACITY:
        return f"{pools} with fewer free CU than cu {request.cu:g}"
    if code is Exclusion.NO_PRICE:
        return f"{pools} without a rate in the price book"
    return f"{pools} priced above max_price_per_hour {request.max_price_per_hour:g}"


def _pool_reason(pool: SitePool, request: Request, code: Exclusion, price: float) -> str:
    if code is Exclusion.GPU_MODEL:
        return f"gpu model {pool.model} not in gpu_models {sorted(request.models)}"
    if code is Exclusion.CAPACITY:
        return f"free {pool.free_cu:.1f} CU < cu {request.cu:g}"
    if code is Exclusion.NO_PRICE:
        return f"the price book has no rate for {pool.device_class} in {pool.region}"
    return f"price {price:.4f}/h > max_price_per_hour {request.max_price_per_hour:g}"
