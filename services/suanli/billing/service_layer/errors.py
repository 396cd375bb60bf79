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


class ChargeNotFound(NotFound):
    def __init__(self, charge_id: str) -> None:
        super().__init__(f"no charge {charge_id}")
        self.charge_id = charge_id


class AlreadyReversed(FailedPrecondition):
    """A charge is reversed at most once, and a reversal is never reversed."""

    def __init__(self, charge_id: str) -> None:
        super().__init__(f"charge {charge_id} is a reversal or already reversed")
        self.charge_id = charge_id
