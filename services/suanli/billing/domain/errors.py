"""Why a fact cannot be billed. Each is a permanent property of the input, so the consumer dead-letters it.

They are request error kinds too (`suanli.errors`), so an API that rates on request answers them with the
platform's status codes.
"""

from __future__ import annotations

from suanli.errors import FailedPrecondition, InvalidArgument


class BillingError(Exception):
    """Base of billing's domain errors."""


class InvalidUsage(BillingError, InvalidArgument):
    """A usage record that breaks an invariant (empty tenant, window that ends before it starts, ...)."""


class UnpricedUsage(BillingError, FailedPrecondition):
    """The price book has no price for the usage (no version in effect, or no matching rate)."""
