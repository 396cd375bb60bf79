"""The price book: what one CU-hour costs, by device class × region × priority tier, from which date on.

Pure and validated (pydantic): a book that loads is internally consistent — versions in date order and in
one currency, no duplicate rate, tiers and discounts that refer to declared tiers. The file format is in
docs/billing.md; `suanli.resources.pricebook_file` reads it.
"""

from __future__ import annotations

import bisect
import itertools
from datetime import datetime
from decimal import Decimal
from functools import cached_property
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

WILDCARD = "*"

RoundingMode = Literal[
    "ROUND_HALF_EVEN",
    "ROUND_HALF_UP",
    "ROUND_HALF_DOWN",
    "ROUND_UP",
    "ROUND_DOWN",
    "ROUND_CEILING",
    "ROUND_FLOOR",
]


def _exact_decimal(value: object) -> object:
    # YAML reads 0.1 as a binary float; its shortest text is what the author wrote, Decimal(0.1) is not.
    if isinstance(value, float):
        return Decimal(repr(value))
    return value


Money = Annotated[Decimal, BeforeValidator(_exact_decimal), Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[Decimal, BeforeValidator(_exact_decimal), Field(ge=0, lt=1, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9*][A-Za-z0-9_.:-]*$")]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Granularity(_Frozen):
    """Usage is billed in whole steps of `seconds`; a window's duration is rounded with `rounding`."""

    seconds: int = Field(default=1, ge=1)
    rounding: RoundingMode = "ROUND_UP"


class AmountRule(_Frozen):
    """How an amount is quantised; the scale is at most 6, the scale of amounts on the wire."""

    scale: int = Field(default=6, ge=0, le=6)
    rounding: RoundingMode = "ROUND_HALF_EVEN"

    @property
    def quantum(self) -> Decimal:
        """The smallest amount step, 10^-scale."""
        return Decimal(1).scaleb(-self.scale)


class Tier(_Frozen):
    """A priority tier: jobs with priority >= min_priority (the first tier that matches, in book order)."""

    name: Name
    min_priority: int | None = None  # None: every priority (the catch-all, last)


class Rate(_Frozen):
    """The price of one CU-hour for a device class × region × tier (``*`` matches anything)."""

    device_class: Name
    region: Name = WILDCARD
    tier: Name = WILDCARD
    cu_hour: Money

    @property
    def key(self) -> tuple[str, str, str]:
        """(device class, region, tier): unique within a version."""
        return (self.device_class, self.region, self.tier)

    @property
    def specificity(self) -> int:
        """How specific the rate is; the most specific matching rate wins."""
        # Device class outranks region outranks tier, so "h200 anywhere" beats "anything in cn-east".
        return 4 * (self.device_class != WILDCARD) + 2 * (self.region != WILDCARD) + (self.tier != WILDCARD)

    def matches(self, device_class: str, region: str, tier: str) -> bool:
        """Whether the rate applies to this device class, region and tier."""
        return (
            self.device_class in (WILDCARD, device_class)
            and self.region in (WILDCARD, region)
            and self.tier in (WILDCARD, tier)
        )


class Discounts(_Frozen):
    """Fractions taken off the rate: preemptible jobs, and per tier (e.g. best-effort). They multiply."""

    preemptible: Fraction = Decimal(0)
    tiers: dict[Name, Fraction] = Field(default_factory=dict)


class PriceVersion(_Frozen):
    """Prices in effect from `effective_from` until the next version's date."""

    effective_from: datetime
    rates: list[Rate] = Field(min_length=1)
    discounts: Discounts = Field(default_factory=Discounts)

    @field_validator("effective_from")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.utcoffset() is None:
            raise ValueError("must carry a time zone, e.g. 2025-01-01T00:00:00Z")
        return value

    @field_validator("rates")
    @classmethod
    def _unique_rates(cls, rates: list[Rate]) -> list[Rate]:
        seen: set[tuple[str, str, str]] = set()
        for rate in rates:
            if rate.key in seen:
                raise ValueError(f"duplicate rate for device_class/region/tier {'/'.join(rate.key)}")
            seen.add(rate.key)
        return rates

    def rate_for(self, device_class: str, region: str, tier: str) -> Rate | None:
        """The most specific matching rate (unique: duplicates are refused at load)."""
        found = [r for r in self.rates if r.matches(device_class, region, tier)]
        return max(found, key=lambda r: r.specificity) if found else None

    def discount_factor(self, tier: str, preemptible: bool) -> Decimal:
        """What is left of the rate after the tier's and the preemptible discount (they multiply)."""
        factor = Decimal(1) - self.discounts.tiers.get(tier, Decimal(0))
        if preemptible:
            factor *= Decimal(1) - self.discounts.preemptible
        return factor


class PriceBook(_Frozen):
    """The whole book: currency, billing granularity, amount rounding, tiers and dated versions."""

    currency: str = Field(pattern=r"^[A-Z]{3}$")
    granularity: Granularity = Field(default_factory=Granularity)
    amount: AmountRule = Field(default_factory=AmountRule)
    tiers: list[Tier] = Field(min_length=1)
    versions: list[PriceVersion] = Field(min_length=1)

    @field_validator("tiers")
    @classmethod
    def _tiers_ordered(cls, tiers: list[Tier]) -> list[Tier]:
        names = [t.name for t in tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, got {names}")
        if tiers[-1].min_priority is not None or any(t.min_priority is None for t in tiers[:-1]):
            raise ValueError("exactly one tier, the last, must omit min_priority (it takes every priority)")
        bounds = [t.min_priority for t in tiers[:-1]]
        if bounds != sorted(bounds, reverse=True) or len(set(bounds)) != len(bounds):  # type: ignore[type-var]
            raise ValueError("min_priority must strictly decrease down the list (first match wins)")
        return tiers

    @field_validator("versions")
    @classmethod
    def _versions_ordered(cls, versions: list[PriceVersion]) -> list[PriceVersion]:
        dates = [v.effective_from for v in versions]
        if any(a >= b for a, b in itertools.pairwise(dates)):
            raise ValueError("effective_from must strictly increase down the list")
        return versions

    @model_validator(mode="after")
    def _tier_names_declared(self) -> PriceBook:
        declared = {t.name for t in self.tiers}
        for i, version in enumerate(self.versions):
            for j, rate in enumerate(version.rates):
                if rate.tier != WILDCARD and rate.tier not in declared:
                    raise ValueError(f"versions[{i}].rates[{j}].tier: unknown tier {rate.tier!r}")
            for name in version.discounts.tiers:
                if name not in declared:
                    raise ValueError(f"versions[{i}].discounts.tiers: unknown tier {name!r}")
        return self

    @cached_property
    def _starts(self) -> list[datetime]:
        return [v.effective_from for v in self.versions]

    def tier_for(self, priority: int) -> str:
        """The tier a job of this priority is priced in (the first tier that matches)."""
        for tier in self.tiers:
            if tier.min_priority is None or priority >= tier.min_priority:
                return tier.name
        raise AssertionError("the last tier takes every priority")  # guaranteed by validation

    def version_at(self, at: datetime) -> PriceVersion | None:
        """The version in effect at `at`: the latest whose date is not after it (None before the first)."""
        index = bisect.bisect_right(self._starts, at) - 1
        return self.versions[index] if index >= 0 else None

    def changes_within(self, start: datetime, end: datetime) -> list[datetime]:
        """Dates of price changes strictly inside (start, end): where a usage window must be split."""
        return [d for d in self._starts if start < d < end]
