"""Which outbox rows the relay sets aside (parks) so that the rows after them flow (pure policy).

A row is parked when the broker refused it as a record (`RecordRefused`: too large, malformed), or when
the same row failed ``max_attempts`` times with errors that are not transient. Transient failures (the
broker unavailable, a leader moving, a timeout: `suanli.infra.transient`) are never counted: an outage
must be waited out with every row kept in order, however long it lasts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from suanli.eventstore.errors import PublishFailed, RecordRefused
from suanli.eventstore.values import OutboxRecord, RowFailure
from suanli.infra.transient import is_transient

# Bounds the error text kept on the row, as the dead-letter headers bound theirs.
MAX_REASON_CHARS = 2048


def describe(error: BaseException) -> str:
    """The reason stored on a failed row: the error class and its message."""
    cause = error.__cause__ if isinstance(error, RecordRefused) and error.__cause__ else error
    return f"{type(cause).__name__}: {cause}"[:MAX_REASON_CHARS]


@dataclass(frozen=True, slots=True)
class ParkingPolicy:
    """How many non-transient failures a row gets before it is parked."""

    max_attempts: int = 5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def judge(self, failed: PublishFailed, rows: Sequence[OutboxRecord]) -> list[RowFailure]:
        """The failures to record, in id order; transient ones are left out (not counted, never parked)."""
        attempts = {row.id: row.attempts for row in rows}
        verdicts: list[RowFailure] = []
        for row_id, error in sorted(failed.failures.items()):
            if is_transient(error):
                continue
            park = isinstance(error, RecordRefused) or attempts.get(row_id, 0) + 1 >= self.max_attempts
            verdicts.append(RowFailure(row_id, describe(error), park))
        return verdicts
