"""The token ledger: tokens issued and revoked, as events in the auth event store (PostgreSQL).

Design (docs/security.md, "Revocation"): the ledger is one event-store schema (``auth`` by default) in
the platform's PostgreSQL, one stream per token (``token-<id>``) holding ``TokenIssued`` and, once
revoked, ``TokenRevoked``; each append writes an outbox row for ``auth.events`` as well, for an audit
feed on Kafka. Services do not need Kafka for it: each verifier keeps a `RevocationView` that reads the
store's global order (``read_all`` after the last position it saw) every few seconds, so a revocation
reaches every service within one refresh interval and survives any restart (it is in the database).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suanli.auth.principal import Role
from suanli.auth.tokens import Grant, sign
from suanli.clock import Clock, from_ms, to_ms
from suanli.contracts import decode, encode, new_envelope, topic_of
from suanli.errors import FailedPrecondition, NotFound
from suanli.eventstore import NO_STREAM, ConcurrencyConflict, EventStore, NewEvent, OutboxMessage

log = logging.getLogger(__name__)

DEFAULT_SCHEMA = "auth"
STREAM_PREFIX = "token-"
PRODUCER = "auth/ledger"
READ_BATCH = 1000


def stream_of(token_id: str) -> str:
    """The event stream of one token."""
    return f"{STREAM_PREFIX}{token_id}"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What the ledger knows of one token (never the token itself)."""

    token_id: str
    subject: str
    tenant: str
    roles: tuple[str, ...]
    issued_at: datetime
    expires_at: datetime
    issued_by: str
    revoked_at: datetime | None = None
    revoked_by: str = ""
    reason: str = ""


class TokenLedger:
    """Records issued and revoked tokens in an event store; reads them back folded per token."""

    def __init__(self, store: EventStore, clock: Clock, ids: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._store = store
        self._clock = clock
        self._ids = ids

    def _event(self, name: str, token_id: str, fields: dict[str, object]) -> tuple[NewEvent, OutboxMessage]:
        event_id = self._ids()
        record = {
            **new_envelope(PRODUCER, token_id, event_id=event_id, occurred_at=self._clock.now()),
            "token_id": token_id,
            **fields,
        }
        event = NewEvent(event_id, name, encode(name, record))
        return event, OutboxMessage.for_event(topic_of(name), token_id.encode(), event)

    async def issue(
        self,
        key: Ed25519PrivateKey,
        subject: str,
        tenant: str,
        roles: frozenset[Role],
        ttl_s: int,
        issued_by: str,
    ) -> tuple[Grant, str]:
        """Sign a new token and record it; the ledger holds it before anyone can use it."""
        now_s = int(to_ms(self._clock.now()) // 1000)
        grant = Grant(subject, tenant, roles, f"tok-{self._ids().hex[:16]}", now_s, now_s + ttl_s)
        token = sign(grant, key)
        await self.issued(grant, issued_by)
        return grant, token

    async def issued(self, grant: Grant, issued_by: str) -> None:
        """Record that ``grant`` was signed (its token id must be new)."""
        event, out = self._event(
            "TokenIssued",
            grant.token_id,
            {
                "subject": grant.subject,
                "tenant": grant.tenant,
                "roles": sorted(r.value for r in grant.roles),
                "issued_at": from_ms(grant.issued_at_s * 1000),
                "expires_at": from_ms(grant.expires_at_s * 1000),
                "issued_by": issued_by,
            },
        )
        await self._store.append(stream_of(grant.token_id), NO_STREAM, [event], outbox=[out])

    async def revoke(self, token_id: str, revoked_by: str, reason: str = "") -> None:
        """Record the revocation of ``token_id``; refuses an unknown or already revoked token."""
        stream = stream_of(token_id)
        history = await self._store.read(stream)
        if not history:
            raise NotFound(f"no token {token_id!r} in the ledger")
        if any(e.event_name == "TokenRevoked" for e in history):
            raise FailedPrecondition(f"token {token_id!r} is already revoked")
        event, out = self._event("TokenRevoked", token_id, {"reason": reason, "revoked_by": revoked_by})
        try:
            await self._store.append(stream, len(history), [event], outbox=[out])
        except ConcurrencyConflict:
            raise FailedPrecondition(f"token {token_id!r} is already revoked") from None

    async def tokens(self) -> list[TokenRecord]:
        """Every token, in issue order, with its revocation if any."""
        records: dict[str, TokenRecord] = {}
        after = 0
        while batch := await self._store.read_all(after, READ_BATCH):
            after = batch[-1].position
            for stored in batch:
                name, r = decode(stored.payload)
                if name == "TokenIssued":
                    records[r["token_id"]] = TokenRecord(
                        r["token_id"],
                        r["subject"],
                        r["tenant"],
                        tuple(r["roles"]),
                        r["issued_at"],
                        r["expires_at"],
                        r["issued_by"],
                    )
                elif name == "TokenRevoked" and r["token_id"] in records:
                    old = records[r["token_id"]]
                    records[r["token_id"]] = TokenRecord(
                        **{
                            **{f: getattr(old, f) for f in old.__slots__},
                            "revoked_at": r["occurred_at"],
                            "revoked_by": r["revoked_by"],
                            "reason": r["reason"],
                        }
                    )
        return list(records.values())


class RevocationView:
    """The set of revoked token ids, kept current by reading the ledger's new events.

    `refresh` reads what was appended since the last call; `run` calls it every ``interval_s``. A failed
    refresh keeps the last known set (and logs): a database blip must not lock everyone out, and a
    revocation is never forgotten, only possibly late by the outage.
    """

    def __init__(self, store: EventStore, interval_s: float = 2.0) -> None:
        self._store = store
        self._after = 0
        self.interval_s = interval_s
        self.revoked: set[str] = set()

    def __contains__(self, token_id: object) -> bool:
        return token_id in self.revoked

    async def refresh(self) -> int:
        """Fold the events appended since the last refresh; returns how many were read."""
        read = 0
        while batch := await self._store.read_all(self._after, READ_BATCH):
            for stored in batch:
                if stored.event_name == "TokenRevoked":
                    self.revoked.add(stored.stream.removeprefix(STREAM_PREFIX))
            self._after = batch[-1].position
            read += len(batch)
        return read

    async def run(self) -> None:
        """Refresh every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.refresh()
            except Exception as exc:  # any database failure: keep what we know, retry next interval
                log.warning("revocation refresh failed, keeping %d known: %r", len(self.revoked), exc)


def role_names() -> str:
    """The roles, as a CLI help lists them."""
    return ", ".join(r.value for r in Role)
