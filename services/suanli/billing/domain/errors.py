"""Why a fact cannot be billed. Each is a permanent property of the input, so the consumer dead-letters it."""

from __future__ import annotations


class BillingError(Exception):
    """Base of billing's domain errors."""


class InvalidUsage(BillingError):
    """A usage record that breaks an invariant (empty tenant, window that ends before it starts, ...)."""


class UnpricedUsage(BillingError):
    """The price book has no price for the usage (no version in effect, or no matching rate)."""
