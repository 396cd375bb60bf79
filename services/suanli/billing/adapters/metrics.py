"""Billing's instrument of the telemetry catalogue (suanli.telemetry.names): the charges it records."""

from __future__ import annotations

from opentelemetry import metrics

from suanli.telemetry.names import BILLING_CHARGES, described


class BillingMetrics:
    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.billing")
        self._charges = meter.create_counter(BILLING_CHARGES, **described(BILLING_CHARGES))
        # Served at 0 from the start, so rate() and alerts see billing before its first charge.
        self._charges.add(0)

    def charged(self, count: int) -> None:
        """``count`` charges committed (usage rated now or released from parking)."""
        if count:
            self._charges.add(count)
