"""The first, straightforward Resolve (one array pass per check, a full sort), kept as the oracle the
fast path in `suanli.routing.domain.scoring` is compared with on randomised views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from suanli.routing.domain.links import LinkState, LinkStatus
from suanli.routing.domain.scoring import (
    Excluded,
    Exclusion,
    Request,
    Resolution,
    Scored,
    ScoringPolicy,
    SitePool,
    UnknownRegion,
)

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

_STATUS_CODES: dict[LinkStatus, int] = {s: i for i, s in enumerate(LinkStatus)}
_UNKNOWN, _OK, _DOWN = (_STATUS_CODES[s] for s in (LinkStatus.UNKNOWN, LinkStatus.OK, LinkStatus.DOWN))
_STATUSES = tuple(LinkStatus)


class OracleTable:
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
        self.unpriced = np.isnan(self.rate)
        # What scoring gathers for the fitting pools, as rows of one array (one gather instead of four):
        # free CU, 1 / total CU (0 for an empty pool) and the CU-hour rate.
        with np.errstate(divide="ignore"):
            inverse_total = np.where(self.total_cu > 0, 1.0 / self.total_cu, 0.0)
        self.scoring_rows: Floats = np.vstack([self.free_cu, inverse_total, self.rate])
        self.any_unpriced = bool(self.unpriced.any())
        self.model_names = tuple(sorted(self.models))
        self._model_index = {m: i for i, m in enumerate(self.model_names)}
        self.model: Ints = np.array([self._model_index[p.model] for p in pools], dtype=np.int64)
        self._model_masks: dict[frozenset[str], npt.NDArray[np.bool_]] = {}
        self.present = np.unique(self.region) if pools else np.zeros(0, dtype=np.int64)
        self.region_sizes: list[int] = np.bincount(self.region, minlength=len(names)).tolist()
        # Exclusion texts by what they say; requests repeat their constraints, the texts are rebuilt with
        # the table (which bounds these).
        self.texts: dict[tuple[object, ...], str] = {}
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

    def other_models(self, models: frozenset[str]) -> npt.NDArray[np.bool_]:
        """Pools whose model is not in ``models`` (cached per set: requests repeat their model lists)."""
        mask = self._model_masks.get(models)
        if mask is None:
            wanted = [self._model_index[m] for m in models if m in self._model_index]
            mask = ~np.isin(self.model, np.array(wanted, dtype=np.int64))
            self._model_masks[models] = mask
        return mask


@dataclass(frozen=True, slots=True)
class _Paths:
    """The origin's row of the matrix, with its own region reachable."""

    rtt: Floats
    loss: Floats
    bandwidth: Floats
    status: Ints


def _paths(table: OracleTable, o: int, policy: ScoringPolicy) -> _Paths:
    rtt, loss = table.rtt[o].copy(), table.loss[o].copy()
    bandwidth, status = table.bandwidth[o].copy(), table.status[o].copy()
    if status[o] == _UNKNOWN:
        # Unmeasured inside the origin region: near by assumption, and no bandwidth limit applies.
        rtt[o], loss[o], status[o], bandwidth[o] = policy.intra_region_rtt_ms, 0.0, _OK, np.inf
    return _Paths(rtt, loss, bandwidth, status)


def _region_codes(paths: _Paths, request: Request) -> Ints:
    # Assigned from the last reason to the first, so the first that applies is what stays.
    codes = np.zeros(paths.status.size, dtype=np.int64)
    if request.min_bandwidth_mbps > 0:
        # An unmeasured bandwidth cannot be promised.
        codes[~(paths.bandwidth >= request.min_bandwidth_mbps)] = Exclusion.BANDWIDTH
    if request.max_rtt_ms > 0:
        codes[paths.rtt > request.max_rtt_ms] = Exclusion.RTT
    codes[paths.status == _UNKNOWN] = Exclusion.NO_PATH
    codes[paths.status == _DOWN] = Exclusion.LINK_DOWN
    return codes


def _pool_codes(table: OracleTable, request: Request, region_codes: Ints) -> tuple[Ints, Floats]:
    price = table.rate * request.priced_cu
    codes = region_codes[table.region]
    site = np.zeros(codes.size, dtype=np.int64)
    if request.max_price_per_hour > 0:
        site[price > request.max_price_per_hour] = Exclusion.PRICE
    if table.any_unpriced:
        site[table.unpriced] = Exclusion.NO_PRICE
    if request.cu > 0:
        site[table.free_cu < request.cu] = Exclusion.CAPACITY
    if request.models:
        site[table.other_models(request.models)] = Exclusion.GPU_MODEL
    np.copyto(codes, site, where=codes == 0)
    return codes, price


def oracle_resolve(table: OracleTable, request: Request, policy: ScoringPolicy) -> Resolution:
    """The best ``request.limit`` candidates, best first, and why the others were excluded."""
    o = table.region_index.get(request.origin)
    if o is None:
        raise UnknownRegion("from_region", request.origin, table.regions)
    paths = _paths(table, o, policy)
    region_codes = _region_codes(paths, request)
    codes, price = _pool_codes(table, request, region_codes)
    fit = np.flatnonzero(codes == 0)
    candidates = _ranked(table, request, policy, paths, fit)
    excluded = _excluded(table, request, paths, region_codes, codes, price)
    return Resolution(candidates, excluded, int(codes.size - fit.size))


def _ranked(
    table: OracleTable, request: Request, policy: ScoringPolicy, paths: _Paths, fit: Ints
) -> tuple[Scored, ...]:
    if fit.size == 0 or request.limit <= 0:
        return ()
    region = table.region[fit]
    free, inverse_total, rate = table.scoring_rows[:, fit]
    compute = np.clip((free - request.cu) * inverse_total, 0.0, 1.0)
    network = ((1.0 - paths.loss) / (1.0 + paths.rtt / policy.rtt_ref_ms))[region]
    cheapest = rate.min()
    # The CU needed multiplies every price alike: the ratio of rates is the ratio of prices.
    price_score = cheapest / rate if cheapest > 0 else (rate == 0).astype(np.float64)
    wc, wn, wp = policy.weights(request.kind).normalised()
    score = wc * compute + wn * network + wp * price_score
    # The one change from the original: a full stable sort, so that equal scores rank in pool order
    # (the original's argpartition left the choice among equal scores at the k-th place open).
    order = np.argsort(-score, kind="stable")[: min(request.limit, fit.size)]
    fit_price = rate * request.priced_cu
    rtt, loss, bandwidth = paths.rtt.tolist(), paths.loss.tolist(), paths.bandwidth.tolist()
    status = paths.status.tolist()
    out = []
    for i, r, total, c, n, p, per_hour in zip(
        fit[order].tolist(),
        region[order].tolist(),
        score[order].tolist(),
        compute[order].tolist(),
        network[order].tolist(),
        price_score[order].tolist(),
        fit_price[order].tolist(),
        strict=True,
    ):
        pool = table.pools[i]
        b = bandwidth[r]
        out.append(
            Scored(
                pool.region,
                pool.site,
                pool.device_class,
                pool.model,
                total,
                c,
                n,
                p,
                pool.free_cu,
                pool.total_cu,
                rtt[r],
                loss[r],
                b if b == b and b != np.inf else None,  # NaN or the origin's unlimited path: unknown
                _STATUSES[status[r]],
                per_hour,
            )
        )
    return tuple(out)


_EXCLUSIONS = tuple(Exclusion)
_GROUPS = 16  # > the number of exclusion codes: region x 16 + code keys one group


def _excluded(
    table: OracleTable,
    request: Request,
    paths: _Paths,
    region_codes: Ints,
    codes: Ints,
    price: Floats,
) -> tuple[Excluded, ...]:
    out: list[Excluded] = []
    o = table.region_index[request.origin]
    present = table.present
    texts = table.texts
    for r in present[region_codes[present] != 0].tolist():
        code = _EXCLUSIONS[int(region_codes[r])]
        key = (o, r, code, request.max_rtt_ms, request.min_bandwidth_mbps)
        text = texts.get(key)
        if text is None:
            text = texts[key] = _region_reason(table, request, paths, o, r, code)
        out.append(Excluded(table.regions[r], "", "", code, text, table.region_sizes[r]))
    site_level = codes >= Exclusion.GPU_MODEL
    if request.explain > 0:
        for i in np.flatnonzero(site_level)[: request.explain].tolist():
            pool = table.pools[i]
            code = _EXCLUSIONS[int(codes[i])]
            out.append(
                Excluded(
                    pool.region,
                    pool.site,
                    pool.device_class,
                    code,
                    _pool_reason(pool, request, code, price[i]),
                )
            )
        return tuple(out)
    # One line per region and reason, with the number of pools behind it.
    groups = np.bincount(
        table.region * _GROUPS + codes, weights=site_level, minlength=len(table.regions) * _GROUPS
    )
    keys = np.flatnonzero(groups)
    for group, count in zip(keys.tolist(), groups[keys].astype(np.int64).tolist(), strict=True):
        r, c = divmod(group, _GROUPS)
        exclusion = _EXCLUSIONS[c]
        text_key = (exclusion, count, request.models, request.cu, request.max_price_per_hour)
        text = texts.get(text_key)
        if text is None:
            text = texts[text_key] = _group_reason(request, exclusion, count)
        out.append(Excluded(table.regions[r], "", "", exclusion, text, int(count)))
    return tuple(out)


def _region_reason(
    table: OracleTable, request: Request, paths: _Paths, o: int, r: int, code: Exclusion
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
