"""Rating: one usage window → charges, in exact decimals.

Rules (docs/billing.md, "Rating"):

1. The window's duration is rounded to the price book's granularity (e.g. up to whole seconds) and every
   device class's CU-seconds are scaled by billed / actual duration.
2. The window is split at every price change (and every period boundary passed in `cuts`) inside it; each
   piece gets CU-seconds in proportion to its time, quantised to the micro-CU-second, the last piece taking
   the remainder so the pieces add up exactly. A piece is priced by the version in effect at its start, so a
   price change is never applied retroactively.
3. unit price = rate per CU-hour × (1 − tier discount) × (1 − preemptible discount if preemptible),
   quantised to 9 places; amount = CU-seconds × unit price / 3600, quantised to the book's amount scale with
   its rounding mode. Only Decimal arithmetic, never float.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal, localcontext

from suanli.billing.domain import ids
from suanli.billing.domain.errors import UnpricedUsage
from suanli.billing.domain.usage import CU_SECONDS_QUANTUM, JobTerms, Usage
from suanli.clock import duration_ms
from suanli.resources.pricebook import PriceBook

UNIT_PRICE_QUANTUM = Decimal("0.000000001")
SECONDS_PER_HOUR = Decimal(3600)
CU_HOURS_QUANTUM = Decimal("0.000001")
# Enough digits that no intermediate product of the rating is rounded by the context.
_PRECISION = 60


@dataclass(frozen=True, slots=True)
class Charge:
    """One rated piece of usage: a device class over a time segment at one unit price."""

    charge_id: str
    usage_event_id: str | None
    tenant: str
    job_id: str
    task_id: str
    device_class: str
    region: str
    tier: str
    preemptible: bool
    start: datetime
    end: datetime
    cu_seconds: Decimal
    unit_price: Decimal  # per CU-hour, after discounts
    amount: Decimal
    currency: str
    reverses: str | None = None

    @property
    def cu_hours(self) -> Decimal:
        return (self.cu_seconds / SECONDS_PER_HOUR).quantize(CU_HOURS_QUANTUM)

    def reversal(self) -> Charge:
        """The correcting charge: same facts, negated quantity and amount (the ledger is never edited)."""
        return replace(
            self,
            charge_id=ids.reversal_id(self.charge_id),
            usage_event_id=None,
            cu_seconds=-self.cu_seconds,
            amount=-self.amount,
            reverses=self.charge_id,
        )


def rate(
    usage: Usage,
    terms: JobTerms,
    region: str,
    book: PriceBook,
    cuts: Iterable[datetime] = (),
) -> list[Charge]:
    """The charges for `usage`; raises `UnpricedUsage` if any piece has no price."""
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        tier = book.tier_for(terms.priority)
        segments = _segments(usage.window_start, usage.window_end, book, cuts)
        factor = _billed_duration(usage, book) / (Decimal(usage.duration_ms) / 1000)
        charges: list[Charge] = []
        for device_class in sorted(usage.cu_seconds):
            billed = (usage.cu_seconds[device_class] * factor).quantize(CU_SECONDS_QUANTUM)
            if billed == 0:
                continue
            for (start, end), cu_seconds in zip(segments, _split(billed, segments), strict=True):
                unit_price = _unit_price(book, start, device_class, region, tier, terms.preemptible)
                amount = (cu_seconds * unit_price / SECONDS_PER_HOUR).quantize(
                    book.amount.quantum, rounding=book.amount.rounding
                )
                charges.append(
                    Charge(
                        charge_id=ids.charge_id(usage.event_id, device_class, start),
                        usage_event_id=usage.event_id,
                        tenant=usage.tenant,
                        job_id=usage.job_id,
                        task_id=usage.task_id,
                        device_class=device_class,
                        region=region,
                        tier=tier,
                        preemptible=terms.preemptible,
                        start=start,
                        end=end,
                        cu_seconds=cu_seconds,
                        unit_price=unit_price,
                        amount=amount,
                        currency=book.currency,
                    )
                )
        return charges


def _billed_duration(usage: Usage, book: PriceBook) -> Decimal:
    step = Decimal(book.granularity.seconds)
    actual = Decimal(usage.duration_ms) / 1000
    return (actual / step).quantize(Decimal(1), rounding=book.granularity.rounding) * step


def _segments(
    start: datetime, end: datetime, book: PriceBook, cuts: Iterable[datetime]
) -> list[tuple[datetime, datetime]]:
    inner = set(book.changes_within(start, end)) | {c for c in cuts if start < c < end}
    points = [start, *sorted(inner), end]
    return list(itertools.pairwise(points))


def _split(total: Decimal, segments: list[tuple[datetime, datetime]]) -> list[Decimal]:
    """`total` in proportion to each segment's time; the last takes the remainder, so they sum exactly."""
    whole = sum((duration_ms(e - s) for s, e in segments), 0)
    parts = [(total * duration_ms(e - s) / whole).quantize(CU_SECONDS_QUANTUM) for s, e in segments[:-1]]
    return [*parts, total - sum(parts, Decimal(0))]


def _unit_price(
    book: PriceBook, at: datetime, device_class: str, region: str, tier: str, preemptible: bool
) -> Decimal:
    version = book.version_at(at)
    if version is None:
        raise UnpricedUsage(f"no price-book version in effect at {at.isoformat()}")
    found = version.rate_for(device_class, region, tier)
    if found is None:
        raise UnpricedUsage(
            f"no rate for device_class={device_class!r} region={region!r} tier={tier!r} "
            f"in the version effective from {version.effective_from.isoformat()}"
        )
    price = found.cu_hour * version.discount_factor(tier, preemptible)
    return price.quantize(UNIT_PRICE_QUANTUM, rounding=book.amount.rounding)
