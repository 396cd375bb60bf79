"""Double-entry: every charge debits the tenant's receivable and credits revenue by the same amount.

Accounts are plain names. Revenue is kept per region and device class, a chart of accounts that lets the
ledger alone answer "what did h200s in cn-east earn" and lets every charge event name its device class.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from suanli.billing.domain.periods import Period
from suanli.billing.domain.rating import Charge


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """Positive amounts are debits, negative credits; the entries of one charge sum to zero."""

    charge_id: str
    account: str
    amount: Decimal


def receivable_account(tenant: str) -> str:
    return f"tenant:{tenant}:receivable"


def revenue_account(region: str, device_class: str) -> str:
    return f"revenue:compute:{region}:{device_class}"


def entries_for(charge: Charge) -> tuple[LedgerEntry, LedgerEntry]:
    """Debit and credit of `charge` (a reversal's negative amount swaps their signs)."""
    return (
        LedgerEntry(charge.charge_id, receivable_account(charge.tenant), charge.amount),
        LedgerEntry(charge.charge_id, revenue_account(charge.region, charge.device_class), -charge.amount),
    )


@dataclass(frozen=True, slots=True)
class BilledCharge:
    """A charge with the period its usage fell in and the period whose invoice carries it.

    They differ only for late usage of an already invoiced period, which is billed as an adjustment.
    """

    charge: Charge
    usage_period: Period
    billing_period: Period

    @property
    def adjustment(self) -> bool:
        return self.usage_period != self.billing_period
