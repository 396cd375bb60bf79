"""Billing's price book (deploy/billing/pricebook.yaml) read as the scheduler needs it: the rates per
CU-hour of the version in effect, standard tier (rates without a tier), before discounts. Billing
validates and rates with the whole book; a book the scheduler cannot read leaves prices out of region
choice (logged), it never stops the scheduler.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from suanli.data import data_path
from suanli.scheduling.domain.pricing import ANY, NO_PRICES, PriceTable, Rate

log = logging.getLogger(__name__)
PRICE_BOOK = "deploy/billing/pricebook.yaml"


def _effective(version: Any) -> datetime:
    return datetime.fromisoformat(str(version["effective_from"]).replace("Z", "+00:00"))


def prices_from(document: Any, at: datetime) -> PriceTable:
    """The table of the version in effect at `at` (the latest that began by then)."""
    versions = sorted(document.get("versions") or (), key=_effective)
    current = [v for v in versions if _effective(v) <= at]
    if not current:
        return NO_PRICES
    rates = [
        Rate(str(r.get("device_class", ANY)), str(r.get("region", ANY)), float(Decimal(str(r["cu_hour"]))))
        for r in current[-1].get("rates") or ()
        if not r.get("tier")
    ]
    return PriceTable(rates, str(document.get("currency") or ""))


def load_prices(at: datetime, path: Path | None = None) -> PriceTable:
    source = path or data_path(PRICE_BOOK)
    try:
        return prices_from(yaml.safe_load(source.read_text()), at)
    except (
        OSError,
        yaml.YAMLError,
        KeyError,
        TypeError,
        ValueError,
        InvalidOperation,
        AttributeError,
    ) as exc:
        log.warning("price book %s unreadable, placing without prices: %r", source, exc)
        return NO_PRICES
