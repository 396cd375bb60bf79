"""Why a billing request is refused, as the platform's request error kinds (mapped once by `suanli.rpc`)."""

from __future__ import annotations

from suanli.billing.domain.periods import Period
from suanli.errors import FailedPrecondition, InvalidArgument, NotFound


class InvalidField(InvalidArgument):
    """A request field that is missing or malformed; the message names the field first."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class PeriodNotEnded(FailedPrecondition):
    """An invoice was asked for a period that is still running."""

    def __init__(self, period: Period) -> None:
        super().__init__(f"period: period {period.label} runs until {period.end.isoformat()}")
        self.period = period


class InvoiceNotFound(NotFound):
    def __init__(self, tenant: str, period: Period) -> None:
        super().__init__(f"no invoice for tenant {tenant!r} in {period.label}")


class UnknownTenant(NotFound):
    """A tenant billing never heard of: no job of it was submitted, nothing was charged or invoiced."""

    def __init__(self, tenant: str) -> None:
        super().__init__(f"unknown tenant {tenant!r}: billing has seen no job, charge or invoice of it")
        self.tenant = tenant


class NoInvoiceYet(NotFound):
    """The latest invoice was asked for a tenant none was issued to yet."""

    def __init__(self, tenant: str, grace_s: float) -> None:
        super().__init__(
            f"no invoice issued to tenant {tenant!r} yet: a period is invoiced {grace_s:g} s after it ends"
        )
        self.tenant = tenant


class ChargeNotFound(NotFound):
    def __init__(self, charge_id: str) -> None:
        super().__init__(f"no charge {charge_id}")
        self.charge_id = charge_id


class AlreadyReversed(FailedPrecondition):
    """A charge is reversed at most once, and a reversal is never reversed."""

    def __init__(self, charge_id: str) -> None:
        super().__init__(f"charge {charge_id} is a reversal or already reversed")
        self.charge_id = charge_id
