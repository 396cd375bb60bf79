"""Records are handled in batches of what has arrived; a failing batch falls back to one record at a time.

A batch is handled in order into one `Batch` and committed once: one broker round trip for all of its
outputs instead of one per output. If anything in it fails (a record that does not decode, a handler's
error, the broker), nothing of it was written, and its records are handled again one by one on the bus's
path for failures (`suanli.bus.deadletter`): what may pass is retried by the bus's `RetryPolicy`, the rest
is dead-lettered with the bus's headers and reasons, so a bad record costs only itself. Retrying is safe
because states are written only after their outputs are acknowledged, and outputs carry deterministic
ids: a second run re-sends the same records.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from suanli.bus.deadletter import DECODE, Failed, retry_failed, sleep
from suanli.bus.retry import RetryPolicy
from suanli.metering.service_layer.ports import Batch

log = logging.getLogger(__name__)

R = TypeVar("R")  # a consumed record, as the consumer delivers it
R_contra = TypeVar("R_contra", contravariant=True)
I = TypeVar("I")  # noqa: E741 -- what a record decodes to

# What a record is handled inside (the adapter's trace context for it); nothing by default.
Scope = Callable[[R], AbstractContextManager[object]]


def _no_scope(record: object) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


class DeadLetters(Protocol[R_contra]):
    """Copies a record that cannot be handled to its dead-letter topic; returns once acknowledged."""

    async def __call__(
        self, record: R_contra, error: Exception, /, *, attempts: int, reason: str
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Intake(Generic[R, I]):
    """How the records of one input are handled: what a record is, and what it does to a batch."""

    decode: Callable[[R], I]
    apply: Callable[[I, Batch], None]
    # Of a batch's decoded items, the positions of those to apply, in order (None: all): an input whose
    # newer records make older ones of the same key redundant applies only the newest.
    select: Callable[[Sequence[I]], Sequence[int]] | None = None


class Batches(Generic[R]):
    """Handles the records of every input in batches; ``begin`` opens a new `Batch`."""

    def __init__(
        self,
        begin: Callable[[], Batch],
        *,
        retry: RetryPolicy,
        dead_letter: DeadLetters[R],
        describe: Callable[[R], str],
        retried: Callable[[R], None] = lambda record: None,
    ) -> None:
        self._begin = begin
        self._retry = retry
        self._dead_letter = dead_letter
        self._describe = describe
        self._retried = retried

    async def handle(self, records: Sequence[R], intake: Intake[R, I], scope: Scope[R] = _no_scope) -> None:
        """Handle ``records`` in order, each inside ``scope(record)``; returns once each is handled or
        dead-lettered."""
        batch = self._begin()
        try:
            items = []
            for record in records:
                with scope(record):
                    items.append(intake.decode(record))
            chosen = range(len(items)) if intake.select is None else intake.select(items)
            for i in chosen:
                with scope(records[i]):
                    intake.apply(items[i], batch)
            await batch.commit()
        except Exception as exc:
            if len(records) > 1:
                log.info("batch of %d failed (%r); handling its records one by one", len(records), exc)
            for record in records:
                with scope(record):
                    await self.handle_one(record, intake)

    async def handle_one(self, record: R, intake: Intake[R, I]) -> None:
        try:
            item = intake.decode(record)
        except Exception as exc:
            await self._dead_letter(record, exc, attempts=0, reason=DECODE)
            return
        try:
            await self._alone(item, intake)
        except Exception as exc:
            outcome = await retry_failed(
                exc,
                lambda: self._alone(item, intake),
                self._retry,
                where=self._describe(record),
                pause=lambda delay_s: self._pause(record, delay_s),
            )
            # A faust agent is stopped by cancelling it, so no backoff ends in Stopped here.
            if isinstance(outcome, Failed):
                await self._dead_letter(
                    record, outcome.error, attempts=outcome.attempts, reason=outcome.reason
                )

    async def _pause(self, record: R, delay_s: float) -> bool:
        self._retried(record)  # counted as the bus's consumers count theirs: a failure tried again
        return await sleep(delay_s)

    async def _alone(self, item: I, intake: Intake[R, I]) -> None:
        batch = self._begin()
        intake.apply(item, batch)
        await batch.commit()
