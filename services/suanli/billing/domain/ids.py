"""Deterministic ids: the same fact always yields the same charge, invoice and event ids.

So a replay after a crash or a broker reset writes byte-identical rows and events, which the unique
constraints and consumers' de-duplication then absorb.
"""

from __future__ import annotations

from datetime import datetime

from suanli.clock import name_id, to_ms

# A fixed namespace for billing's name-based (v5) UUIDs; changing it would re-key every charge.
NAMESPACE = "6f1d3c2e-8a47-5b9e-9c1f-2d7a4e6b8c01"


def charge_id(usage_event_id: str, device_class: str, segment_start: datetime) -> str:
    return name_id(NAMESPACE, f"charge/{usage_event_id}/{device_class}/{to_ms(segment_start)}")


def reversal_id(charge_id_: str) -> str:
    return name_id(NAMESPACE, f"reversal/{charge_id_}")


def invoice_id(tenant: str, period_start: datetime) -> str:
    return name_id(NAMESPACE, f"invoice/{tenant}/{to_ms(period_start)}")


def event_id(event_name: str, subject_id: str) -> str:
    """Id of the event announcing a charge or an invoice: one event per subject."""
    return name_id(NAMESPACE, f"event/{event_name}/{subject_id}")
