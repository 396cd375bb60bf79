"""The command topic: upstream systems submit and cancel jobs on `jobs.commands`; the leader carries each
command out through the same `JobRequests` as SubmitJob / CancelJob and answers on `jobs.replies`, keyed
by the command's request_id (docs/commands.md).

- Idempotent by request_id, as the RPC is: a command sent twice (or redelivered) names one job, and each
  copy is answered with the same reply (ok, job id, code, message); a redelivered copy's reply even keeps
  its event id, derived from the command's.
- A command that can never succeed as sent (undecodable, not a command, missing fields, an invalid spec,
  a queue of another tenant) goes to `jobs.commands.dlq` with the reason, and its sender gets an error
  reply (`dead_lettered`) whenever a request_id can be read (the record's, else its Kafka key).
- A well-formed command refused by the state of things (unknown job, a finished job, a request_id
  reused with another spec, a tenant over its limits) is answered with the RPC's status and message.
- Transient failures are retried by the bus; a deposed leader holds the command uncommitted, so the next
  leader handles it.

Replies are published after the command's effect is committed and before its offset is: a crash in
between handles the command again, which (idempotent) sends the same reply again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NoReturn

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import ConsumedEvent, EventPublisher, ProducerSettings, RetriableError
from suanli.bus.deadletter import DECODE
from suanli.bus.headers import EVENT_ID, EVENT_NAME, header
from suanli.bus.records import ConsumedRecord
from suanli.clock import Clock
from suanli.contracts import new_envelope
from suanli.errors import InvalidArgument, PermissionDenied, RequestError
from suanli.eventstore import ConcurrencyConflict
from suanli.jobspec import JobSpecError, parse_jobspec, to_proto
from suanli.jobspec.limits import MAX_REQUEST_ID
from suanli.rpc import status_of
from suanli.scheduling.domain.jobs import Actor, JobView
from suanli.scheduling.entrypoints.job_requests import JobRequests
from suanli.scheduling.service_layer.errors import NotLeader

log = logging.getLogger(__name__)

SUBMIT: Final = "JobSubmissionRequested"
CANCEL: Final = "JobCancellationRequested"
ANSWERED: Final = "JobCommandAnswered"
VIA: Final = "jobs.commands"
_REPLY_NS = uuid.UUID("2d0b5e1e-8f0c-4b55-9a57-3c1f6d2a7e90")
# Refusals that depend on nothing but the command itself: it can never succeed as sent.
_MALFORMED: Final = (InvalidArgument, PermissionDenied)


class InvalidCommand(ValueError):
    """A command that can never succeed as sent; dead-lettered with this message and answered."""

    def __init__(self, message: str, record: Mapping[str, Any], code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.record = record
        self.code = code


class CommandTopic:
    """The consumer's handler (`on_command`) and dead-letter hook (`on_dead_letter`), with the reply
    publisher it owns (started on first use, closed by `aclose`)."""

    def __init__(
        self,
        requests: JobRequests,
        bootstrap: str,
        reply_topic: str,
        *,
        clock: Clock,
        producer: str,
        hold: Callable[[], Awaitable[NoReturn]],
    ) -> None:
        """`hold`: waits while this instance is deposed, then raises (`SchedulingApp._hold`)."""
        self._requests = requests
        self._bootstrap = bootstrap
        self._reply_topic = reply_topic
        self._clock = clock
        self._producer = producer
        self._hold = hold
        self._publisher: EventPublisher | None = None
        self._handlers: Mapping[str, Callable[[Mapping[str, Any]], Awaitable[JobView]]] = {
            SUBMIT: self._submit,
            CANCEL: self._cancel,
        }

    async def aclose(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            await publisher.stop()

    # -- the consumer's handler --------------------------------------------------------------------

    async def on_command(self, event: ConsumedEvent) -> None:
        record = event.record
        handler = self._handlers.get(event.event_name)
        if handler is None:
            raise InvalidCommand(f"{event.event_name or 'a tombstone'} is not a command of {VIA}", record)
        try:
            job = await handler(record)
        except NotLeader:
            await self._hold()
        except ConcurrencyConflict as exc:  # another write came first: decide again on the new version
            raise RetriableError(f"{event.event_name}: {exc!r}") from exc
        except _MALFORMED as exc:
            raise InvalidCommand(str(exc), record, status_of(exc).name) from exc
        except RequestError as exc:
            await self._reply(event.event_name, record, ok=False, code=status_of(exc).name, message=str(exc))
            return
        done = "submitted" if event.event_name == SUBMIT else "cancelled"
        await self._reply(event.event_name, record, ok=True, code="OK", job_id=job.id, message=f"job {done}")

    async def _submit(self, record: Mapping[str, Any]) -> JobView:
        request_id, tenant, actor = _requester(record)
        try:
            spec = parse_jobspec(str(record.get("spec") or ""), source="spec")
        except JobSpecError as exc:
            raise InvalidArgument("; ".join(_spec_problem(p) for p in exc.problems)) from None
        request = pb.SubmitJobRequest(request_id=request_id, spec=to_proto(spec))
        return await self._requests.submit(request, actor, lambda t: t == tenant)

    async def _cancel(self, record: Mapping[str, Any]) -> JobView:
        _, tenant, actor = _requester(record)
        requested_by = f"{actor.subject}@{tenant} via {VIA}"
        return await self._requests.cancel(
            str(record.get("job_id") or ""),
            str(record.get("reason") or ""),
            requested_by,
            actor,
            lambda t: t == tenant,
        )

    # -- the consumer's dead-letter hook -----------------------------------------------------------

    async def on_dead_letter(self, record: ConsumedRecord, error: BaseException, reason: str) -> None:
        """Answer the sender of a dead-lettered command, when its request_id can be read."""
        headers = tuple(record.headers or ())
        if isinstance(error, InvalidCommand):
            command, code, message = str(header(headers, EVENT_NAME) or ""), error.code, str(error)
            fields: Mapping[str, Any] = error.record
        elif reason == DECODE:
            command, code, message = "", "INVALID_ARGUMENT", f"undecodable command: {error}"
            fields = {"event_id": header(headers, EVENT_ID) or ""}
        else:  # retries exhausted: a dependency stayed away; the dead letter can be replayed
            command, code, message = str(header(headers, EVENT_NAME) or ""), "UNAVAILABLE", str(error)
            fields = {"event_id": header(headers, EVENT_ID) or ""}
        request_id = str(fields.get("request_id") or "") or _key(record.key)
        if not request_id:
            log.warning(
                "dead-lettered command at %s@%d has no request_id: no reply", record.topic, record.offset
            )
            return
        await self._reply(
            command,
            {**fields, "request_id": request_id},
            ok=False,
            code=code,
            message=f"{message} (dead-lettered to {record.topic}.dlq)",
            dead_lettered=True,
        )

    # -- replies ----------------------------------------------------------------------------------

    async def _reply(
        self,
        command: str,
        record: Mapping[str, Any],
        *,
        ok: bool,
        code: str,
        message: str,
        job_id: str = "",
        dead_lettered: bool = False,
    ) -> None:
        request_id = str(record.get("request_id") or "")
        command_event_id = str(record.get("event_id") or "")
        # The same command (a redelivery) gets the same reply id, so a consumer de-duplicating by event
        # id sees one answer; another copy sent with the same request_id gets its own.
        seed = command_event_id or f"{request_id}/{code}"
        reply = {
            **new_envelope(
                self._producer,
                request_id,
                event_id=uuid.uuid5(_REPLY_NS, seed),
                occurred_at=self._clock.now(),
            ),
            "request_id": request_id,
            "command": command,
            "command_event_id": command_event_id,
            "tenant": str(record.get("tenant") or ""),
            "ok": ok,
            "job_id": job_id,
            "code": code,
            "message": message,
            "dead_lettered": dead_lettered,
        }
        publisher = await self._started()
        await publisher.publish(self._reply_topic, request_id, ANSWERED, reply)

    async def _started(self) -> EventPublisher:
        if self._publisher is None:
            publisher = EventPublisher(
                self._bootstrap, settings=ProducerSettings(linger_ms=0, client_id="suanli-scheduling-replies")
            )
            await publisher.start()  # a broker away fails here: the bus retries the command
            self._publisher = publisher
        return self._publisher


def _requester(record: Mapping[str, Any]) -> tuple[str, str, Actor]:
    """The command's request_id, tenant and who asked; `InvalidArgument` when one is missing or bad."""
    request_id = str(record.get("request_id") or "")
    if not request_id:
        raise InvalidArgument("request_id: is required (the idempotency key and the reply's key)")
    if len(request_id) > MAX_REQUEST_ID:
        raise InvalidArgument(f"request_id: must be at most {MAX_REQUEST_ID} characters")
    tenant = str(record.get("tenant") or "")
    if not tenant:
        raise InvalidArgument("tenant: is required")
    if "/" in tenant:
        raise InvalidArgument(f"tenant: {tenant!r} must be one queue segment (no '/')")
    subject = str(record.get("principal") or "") or str(record.get("producer") or "") or "unknown"
    # No token: the command topic is a trusted-producer interface (docs/commands.md, Security).
    return request_id, tenant, Actor(subject, tenant, "")


def _spec_problem(problem: str) -> str:
    """A job-spec problem as a path under the command's `spec` field, like the RPC's field paths."""
    if problem.startswith("spec"):  # the document as a whole ("spec: ...")
        return problem
    if problem.startswith(("line ", "not valid YAML")):
        return f"spec: {problem}"
    return f"spec.{problem}"


def _key(key: bytes | None) -> str:
    return "" if key is None else key.decode("utf-8", errors="replace")
