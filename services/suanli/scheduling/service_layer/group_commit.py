"""Group commit: the commands waiting for the service lock are decided together and committed in one
transaction, so submits, task reports and reconciliations cost one round of catch-up and commit per batch
rather than per command.

Under load the lock is the bottleneck (every decision reads the projection the previous commit produced),
and a PostgreSQL transaction costs the same few round trips whether it appends to one stream or fifty.
Each command is *planned* against the projection as of the batch's catch-up; plans touching the same
stream cannot share a batch (the second would be decided on a stale version), so the later one waits for
the next batch and is planned again after the first is recorded. The exception is a *chained* plan (a
task report): it is decided on the state its stream's earlier chained plans of the batch leave behind, so
its events are appended after theirs in the same append: the reports of one large job share a batch
instead of costing a commit each. When the store refuses a batch as a
whole (a duplicate event id, a version moved under us), its plans are committed one by one, so one
command's refusal is that command's answer alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context

from suanli.eventstore import ConcurrencyConflict, DuplicateEventId
from suanli.scheduling.service_layer.ports import Append, Writer
from suanli.scheduling.service_layer.projection import Projection

log = logging.getLogger(__name__)

REFUSALS = (ConcurrencyConflict, DuplicateEventId)


def _no_answer() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Plan:
    """One command's decision: what to record, and the command's answer once it is recorded."""

    appends: Sequence[Append] = ()
    answer: Callable[[], Any] = _no_answer
    # The answer when the store refuses this plan on its own (a redelivered report is a duplicate, a
    # concurrent submit of the same request took the job id); None lets the refusal reach the caller.
    on_refused: Callable[[Exception], Any] | None = None
    # Whether what it records may let a waiting job in (a new job, room given back): only then does the
    # commit wake the scheduling cycle. A task that started changes nothing a cycle could use.
    wakes: bool = True
    # Decided on the stream's state after this batch's earlier chained plans (see the module docstring);
    # `staged` is called once the plan is accepted into the batch, so the next link plans on top of it.
    chained: bool = False
    staged: Callable[[], None] | None = None

    @property
    def streams(self) -> frozenset[str]:
        return frozenset(a.stream for a in self.appends)


@dataclass(slots=True)
class _Ticket:
    command: Any
    future: asyncio.Future[Any]
    # The caller's trace context: the drainer plans the command in it, so its events carry the caller's trace.
    trace: Context = field(default_factory=otel_context.get_current)

    def resolve(self, outcome: Callable[[], Any]) -> None:
        if self.future.done():  # the caller gave up (cancelled); the decision stands regardless
            return
        try:
            self.future.set_result(outcome())
        except Exception as exc:
            self.future.set_exception(exc)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


def _merged(appends: Iterable[Append]) -> list[Append]:
    """One append per stream: a chained plan's events follow its stream's earlier ones, at the version
    the first append expects."""
    by_stream: dict[str, Append] = {}
    for a in appends:
        first = by_stream.get(a.stream)
        by_stream[a.stream] = a if first is None else replace(first, events=[*first.events, *a.events])
    return list(by_stream.values())


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


Planner = Callable[[Any], Plan]


@dataclass
class GroupCommitter:
    writer: Writer
    projection: Projection
    lock: asyncio.Lock
    planners: Mapping[type, Planner]
    check_leader: Callable[[], None]
    on_batch: Callable[[], None] = lambda: None  # before planning a batch (per-batch counters)
    on_committed: Callable[[], None] = lambda: None  # after a commit that wakes is caught up
    # Work that runs after each batch while the lock is still held (the scheduling cycle, when a batch
    # woke it). Under load the queue never empties, so anything that waited for the lock instead would
    # wait for the whole drain: seconds, with submits and reports arriving at 150/s.
    between_batches: Callable[[], Awaitable[None]] | None = None
    # Whether other work waits for the lock (a cancel, a lost node, the interval cycle): the drainer then
    # lets it in after the batch in progress rather than after the queue empties, which under load is never.
    others_waiting: Callable[[], bool] = lambda: False
    _queue: list[_Ticket] = field(default_factory=list)
    _drainer: asyncio.Task[None] | None = None

    def accepts(self, command: Any) -> bool:
        return type(command) in self.planners

    async def submit(self, command: Any) -> Any:
        ticket = _Ticket(command, asyncio.get_running_loop().create_future())
        # A caller that gave up never reads its answer: an error there (NotLeader while leadership
        # moves, under load for every queued report) is the caller's to know, not a traceback per ticket.
        ticket.future.add_done_callback(_retrieved)
        self._queue.append(ticket)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="scheduling-group-commit")
        # Shielded: a caller that gives up (a gRPC deadline) must not cancel the batch others wait on.
        return await asyncio.shield(ticket.future)

    async def _drain(self) -> None:
        while await self._drain_turn():
            pass  # asyncio.Lock is fair: the waiters are ahead of this task when it asks again

    async def _drain_turn(self) -> bool:
        """Batches until the queue is empty (False), or until others wait for the lock after a batch
        (True: ask again)."""
        async with self.lock:
            # No await between the last emptiness check and returning, so a ticket queued meanwhile
            # always finds this task done and starts a new one.
            while self._queue:
                tickets, self._queue = self._queue, []
                try:
                    deferred = await self._run(tickets)
                except Exception as exc:  # e.g. the catch-up after a commit: the batch's callers are told
                    for ticket in tickets:
                        ticket.fail(exc)
                    continue
                except BaseException:
                    for ticket in tickets:
                        ticket.fail(RuntimeError("the scheduler is stopping"))
                    raise
                self._queue[:0] = deferred
                if self.between_batches is not None:
                    await self.between_batches()
                if self._queue and self.others_waiting():
                    return True
            return False

    async def _run(self, tickets: list[_Ticket]) -> list[_Ticket]:
        """Plan, commit and answer one batch; return the tickets that must wait for the next one."""
        try:
            self.check_leader()
            await self.writer.catch_up(self.projection)
        except Exception as exc:
            for ticket in tickets:
                ticket.fail(exc)
            return []
        self.on_batch()
        staged, deferred = self._plan(tickets)
        appends = _merged(a for _, plan in staged for a in plan.appends)
        if not appends:
            for ticket, plan in staged:
                ticket.resolve(plan.answer)
            return deferred
        try:
            await self.writer.commit(appends)
        except REFUSALS as exc:
            if len(staged) > 1:
                log.debug("batch of %d refused (%r): committing one by one", len(staged), exc)
                return [*await self._one_by_one(staged), *deferred]
            await self._refused(*staged[0], exc)
            return deferred
        except Exception as exc:
            for ticket, _ in staged:
                ticket.fail(exc)
            return deferred
        await self._caught_up(any(plan.wakes for _, plan in staged if plan.appends))
        for ticket, plan in staged:
            ticket.resolve(plan.answer)
        return deferred

    def _plan(self, tickets: list[_Ticket]) -> tuple[list[tuple[_Ticket, Plan]], list[_Ticket]]:
        """The batch's accepted plans, and the tickets that wait for the next batch."""
        staged: list[tuple[_Ticket, Plan]] = []
        deferred: list[_Ticket] = []
        touched: set[str] = set()
        chain: set[str] = set()  # streams only chained plans touched so far
        for ticket in tickets:
            token = otel_context.attach(ticket.trace)
            try:
                plan = self.planners[type(ticket.command)](ticket.command)
            except Exception as exc:
                ticket.fail(exc)
                continue
            finally:
                otel_context.detach(token)
            clash = plan.streams & touched
            if clash and not (plan.chained and clash <= chain):
                deferred.append(ticket)
                continue
            if plan.chained:
                chain |= plan.streams - touched
            else:
                chain -= plan.streams
            touched |= plan.streams
            if plan.staged is not None:
                plan.staged()
            staged.append((ticket, plan))
        return staged, deferred

    async def _one_by_one(self, staged: list[tuple[_Ticket, Plan]]) -> list[_Ticket]:
        """Each plan on its own; returns the chained plans whose stream's earlier link was refused: they
        were decided on a state that was not recorded, so they wait for the next batch."""
        broken: set[str] = set()
        again: list[_Ticket] = []
        for i, (ticket, plan) in enumerate(staged):
            if plan.chained and plan.streams & broken:
                again.append(ticket)
                continue
            if not plan.appends:
                ticket.resolve(plan.answer)
                continue
            try:
                await self.writer.commit(plan.appends)
            except REFUSALS as exc:
                broken |= plan.streams
                await self._refused(ticket, plan, exc)
                continue
            except Exception as exc:
                for later, _ in staged[i:]:
                    later.fail(exc)
                return again
            await self._caught_up(plan.wakes)
            ticket.resolve(plan.answer)
        return again

    async def _refused(self, ticket: _Ticket, plan: Plan, exc: Exception) -> None:
        if plan.on_refused is None:
            ticket.fail(exc)
            return
        on_refused = plan.on_refused
        await self.writer.catch_up(self.projection)
        ticket.resolve(lambda: on_refused(exc))

    async def _caught_up(self, wake: bool) -> None:
        await self.writer.catch_up(self.projection)
        if wake:
            self.on_committed()
