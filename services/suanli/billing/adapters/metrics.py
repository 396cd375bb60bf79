"""Billing's instrument of the telemetry catalogue (suanli.telemetry.names): the charges it records."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import metrics

from suanli.telemetry.names import BILLING_CHARGES, described


class BillingMetrics:
    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.billing")
        self._charges = meter.create_counter(BILLING_CHARGES, **described(BILLING_CHARGES))
        self._tenants: set[str] = set()

    def tenant_known(self, tenant: str) -> None:
        """A tenant billing will charge (its job was submitted): its series is served from 0 on, so rate()
        and alerts see it before its first charge."""
        if tenant not in self._tenants:
            self._tenants.add(tenant)
            self._charges.add(0, {"tenant": tenant})

    def charged(self, by_tenant: Mapping[str, int]) -> None:
        """Charges committed (usage rated now or released from parking), per tenant charged."""
        for tenant, count in by_tenant.items():
            if count:
                self._tenants.add(tenant)
                self._charges.add(count, {"tenant": tenant})
