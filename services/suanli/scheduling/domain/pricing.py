"""Prices per CU-hour by device class and region, for choosing a region and for the expected price of a
placement. A small read of billing's price book (its standard tier, before discounts): billing rates
usage; the scheduler only needs to compare regions and say what a placement is expected to cost.

Rates match as in the price book, the most specific first: device class and region, then the device
class anywhere, then any class in the region, then any class anywhere ("*").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from suanli.resources import cpu_cu, cu_of, device_class

ANY = "*"
CPU_CLASS = "cpu"
_SLUG = re.compile(r"[^a-z0-9]+")


def class_of(model: str) -> str:
    """The price book's device class of a GPU model ('NVIDIA H200' -> 'h200'), as metering names it."""
    return _SLUG.sub("-", device_class(model).model.lower()).strip("-") or "unknown"


@dataclass(frozen=True, slots=True)
class Rate:
    device_class: str
    region: str
    cu_hour: float


class PriceTable:
    __slots__ = ("_rates", "currency")

    def __init__(self, rates: Iterable[Rate] = (), currency: str = "") -> None:
        self._rates = {(r.device_class, r.region): r.cu_hour for r in rates}
        self.currency = currency

    def __bool__(self) -> bool:
        return bool(self._rates)

    def cu_hour(self, klass: str, region: str) -> float | None:
        for key in ((klass, region), (klass, ANY), (ANY, region), (ANY, ANY)):
            rate = self._rates.get(key)
            if rate is not None:
                return rate
        return None

    def model_cu_hour(self, model: str | None, region: str) -> float | None:
        """The rate of a GPU model's class in a region; CPU's rate for None."""
        return self.cu_hour(CPU_CLASS if model is None else class_of(model), region)

    def expected_per_hour(
        self, region: str, cpu_milli: int, shares: Iterable[tuple[str, int]]
    ) -> float | None:
        """What a task holding `cpu_milli` and `shares` ((model, milli) per device) is expected to cost an
        hour in `region`, in the price book's currency; None without a price book or a matching rate."""
        if not self._rates:
            return None
        total = 0.0
        cpu_rate = self.cu_hour(CPU_CLASS, region)
        if cpu_milli and cpu_rate is not None:
            total += cpu_cu(cpu_milli) * cpu_rate
        for model, milli in shares:
            rate = self.model_cu_hour(model, region)
            if rate is None:
                return None
            total += cu_of(model, milli) * rate
        return total


NO_PRICES = PriceTable()
