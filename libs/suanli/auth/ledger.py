"""The token ledger: tokens and signing keys, as events in the auth event store (PostgreSQL).

Design (docs/security.md, "Revocation"): the ledger is one event-store schema (``auth`` by default) in
the platform's PostgreSQL, one stream per token (``token-<id>``) holding ``TokenIssued`` and, once
revoked, ``TokenRevoked``, and one per signing key (``key-<kid>``) holding ``SigningKeyAdded`` and, once
retired, ``SigningKeyRetired``; each append writes an outbox row for ``auth.events`` as well, for an
audit feed on Kafka. Services do not need Kafka for it: each verifier keeps a `LedgerView` that reads
the store's global order (``read_all`` after the last position it saw) every few seconds, so a
revocation, a new key or a retirement reaches every service within one refresh interval and survives
any restart (it is in the database).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from suanli.auth.principal import Role
from suanli.auth.tokens import Grant, KeyRing, key_id, parse_public_key, public_pem, sign
from suanli.clock import Clock, from_ms, to_ms
from suanli.contracts import decode, encode, new_envelope, topic_of
from suanli.errors import FailedPrecondition, NotFound
from suanli.eventstore import (
    NO_STREAM,
    ConcurrencyConflict,
    EventStore,
    NewEvent,
    OutboxMessage,
    StoredEvent,
)

log = logging.getLogger(__name__)

DEFAULT_SCHEMA = "auth"
STREAM_PREFIX = "token-"
KEY_STREAM_PREFIX = "key-"
PRODUCER = "auth/ledger"
READ_BATCH = 1000


def stream_of(token_id: str) -> str:
    """The event stream of one token."""
    return f"{STREAM_PREFIX}{token_id}"


def key_stream_of(kid: str) -> str:
    """The event stream of one signing key."""
    return f"{KEY_STREAM_PREFIX}{kid}"


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


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What the ledger knows of one signing key: its public half, and its retirement if any."""

    key_id: str
    public_key: str
    added_at: datetime
    added_by: str
    retired_at: datetime | None = None  # from when its tokens are refused (may lie ahead)
    retired_by: str = ""
    reason: str = ""

    def status(self, now: datetime) -> str:
        """``active``, ``retiring`` (a retirement ahead) or ``retired``."""
        if self.retired_at is None:
            return "active"
        return "retiring" if self.retired_at > now else "retired"


# What a later event of a token's or key's stream changes in its record: record field <- event field.
# `retire_key` only ever brings a retirement forward, so the last retirement is the earliest.
_UPDATES: Mapping[str, Mapping[str, str]] = {
    "TokenRevoked": {"revoked_at": "occurred_at", "revoked_by": "revoked_by", "reason": "reason"},
    "SigningKeyRetired": {"retired_at": "effective_at", "retired_by": "retired_by", "reason": "reason"},
}


class TokenLedger:
    """Records tokens and signing keys in an event store; reads them back folded per token and key."""

    def __init__(self, store: EventStore, clock: Clock, ids: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._store = store
        self._clock = clock
        self._ids = ids

    def _event(
        self, name: str, id_field: str, subject: str, fields: Mapping[str, object]
    ) -> tuple[NewEvent, OutboxMessage]:
        event_id = self._ids()
        record = {
            **new_envelope(PRODUCER, subject, event_id=event_id, occurred_at=self._clock.now()),
            id_field: subject,
            **fields,
        }
        event = NewEvent(event_id, name, encode(name, record))
        return event, OutboxMessage.for_event(topic_of(name), subject.encode(), event)

    async def issue(
        self,
        key: Ed25519PrivateKey,
        subject: str,
        tenant: str,
        roles: frozenset[Role],
        ttl_s: int,
        issued_by: str,
    ) -> tuple[Grant, str]:
        """Sign a new token and record it; the ledger holds it before anyone can use it.

        Refuses to sign with a key the ledger has retired (every service would refuse the token).
        """
        kid = key_id(key.public_key())
        retired_at = _retired_at(await self._store.read(key_stream_of(kid)))
        if retired_at is not None and retired_at <= self._clock.now():
            raise FailedPrecondition(f"signing key {kid} is retired: rotate it (`suanli auth key rotate`)")
        now_s = int(to_ms(self._clock.now()) // 1000)
        grant = Grant(subject, tenant, roles, f"tok-{self._ids().hex[:16]}", now_s, now_s + ttl_s)
        token = sign(grant, key)
        await self.issued(grant, issued_by)
        return grant, token

    async def issued(self, grant: Grant, issued_by: str) -> None:
        """Record that ``grant`` was signed (its token id must be new)."""
        event, out = self._event(
            "TokenIssued",
            "token_id",
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
        fields = {"reason": reason, "revoked_by": revoked_by}
        event, out = self._event("TokenRevoked", "token_id", token_id, fields)
        try:
            await self._store.append(stream, len(history), [event], outbox=[out])
        except ConcurrencyConflict:
            raise FailedPrecondition(f"token {token_id!r} is already revoked") from None

    async def add_key(self, key: Ed25519PublicKey, added_by: str) -> bool:
        """Record ``key`` as a signing key; False when the ledger already holds it (nothing written)."""
        kid = key_id(key)
        event, out = self._event(
            "SigningKeyAdded", "key_id", kid, {"public_key": public_pem(key), "added_by": added_by}
        )
        try:
            await self._store.append(key_stream_of(kid), NO_STREAM, [event], outbox=[out])
        except ConcurrencyConflict:
            return False
        return True

    async def retire_key(self, kid: str, retired_by: str, after_s: int = 0, reason: str = "") -> datetime:
        """Retire ``kid`` ``after_s`` seconds from now; when its tokens will be refused.

        A key already retired can only be retired earlier (a grace period cut short), never later.
        """
        stream = key_stream_of(kid)
        history = await self._store.read(stream)
        if not history:
            raise NotFound(f"no signing key {kid!r} in the ledger (`suanli auth key list`)")
        effective = from_ms(to_ms(self._clock.now()) + after_s * 1000)
        earlier = _retired_at(history)
        if earlier is not None and earlier <= effective:
            raise FailedPrecondition(
                f"signing key {kid!r} is already retired from {earlier:%Y-%m-%d %H:%M:%S} UTC"
            )
        fields = {"effective_at": effective, "reason": reason, "retired_by": retired_by}
        event, out = self._event("SigningKeyRetired", "key_id", kid, fields)
        try:
            await self._store.append(stream, len(history), [event], outbox=[out])
        except ConcurrencyConflict:
            raise FailedPrecondition(f"signing key {kid!r} changed meanwhile: run it again") from None
        return effective

    async def tokens(self) -> list[TokenRecord]:
        """Every token, in issue order, with its revocation if any."""
        return [r for r in await self._fold() if isinstance(r, TokenRecord)]

    async def keys(self) -> list[KeyRecord]:
        """Every signing key, in the order added, with its retirement if any."""
        return [r for r in await self._fold() if isinstance(r, KeyRecord)]

    async def _fold(self) -> list[TokenRecord | KeyRecord]:
        records: dict[str, TokenRecord | KeyRecord] = {}
        after = 0
        while batch := await self._store.read_all(after, READ_BATCH):
            after = batch[-1].position
            for stored in batch:
                name, r = decode(stored.payload)
                if name == "TokenIssued":
                    records[stored.stream] = TokenRecord(
                        r["token_id"],
                        r["subject"],
                        r["tenant"],
                        tuple(r["roles"]),
                        r["issued_at"],
                        r["expires_at"],
                        r["issued_by"],
                    )
                elif name == "SigningKeyAdded":
                    records[stored.stream] = KeyRecord(
                        r["key_id"], r["public_key"], r["occurred_at"], r["added_by"]
                    )
                elif name in _UPDATES and stored.stream in records:
                    changes = {field: r[source] for field, source in _UPDATES[name].items()}
                    records[stored.stream] = dataclasses.replace(records[stored.stream], **changes)
        return list(records.values())


def _retired_at(key_history: list[StoredEvent]) -> datetime | None:
    """When a key's history retires it (its earliest retirement), or None."""
    times = [decode(e.payload)[1]["effective_at"] for e in key_history if e.event_name == "SigningKeyRetired"]
    return min(times, default=None)


class LedgerView:
    """The revoked token ids and the signing keys (a `KeyRing`), kept current from the ledger's new events.

    `refresh` reads what was appended since the last call; `run` calls it every ``interval_s``. A failed
    refresh keeps what is known (and logs): a database blip must not lock everyone out, and a revocation
    or retirement is never forgotten, only possibly late by the outage.
    """

    def __init__(self, store: EventStore, interval_s: float = 2.0, keys: KeyRing | None = None) -> None:
        self._store = store
        self._after = 0
        self.interval_s = interval_s
        self.revoked: set[str] = set()
        self.keys = keys if keys is not None else KeyRing()

    def __contains__(self, token_id: object) -> bool:
        return token_id in self.revoked

    async def refresh(self) -> int:
        """Fold the events appended since the last refresh; returns how many were read."""
        read = 0
        while batch := await self._store.read_all(self._after, READ_BATCH):
            for stored in batch:
                self._apply(stored)
            self._after = batch[-1].position
            read += len(batch)
        return read

    def _apply(self, stored: StoredEvent) -> None:
        if stored.event_name == "TokenRevoked":
            self.revoked.add(stored.stream.removeprefix(STREAM_PREFIX))
        elif stored.event_name == "SigningKeyAdded":
            record = decode(stored.payload)[1]
            try:
                self.keys.add(parse_public_key(record["public_key"].encode()))
            except ValueError as exc:  # one bad record must not stop revocations from being read
                log.error(
                    "signing key %s in the ledger is not usable, not trusted: %s", record["key_id"], exc
                )
        elif stored.event_name == "SigningKeyRetired":
            record = decode(stored.payload)[1]
            self.keys.retire(record["key_id"], to_ms(record["effective_at"]) / 1000)

    async def run(self) -> None:
        """Refresh every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.refresh()
            except Exception as exc:  # any database failure: keep what we know, retry next interval
                log.warning(
                    "ledger refresh failed, keeping %d revoked, %d keys: %r",
                    len(self.revoked),
                    len(self.keys),
                    exc,
                )


def role_names() -> str:
    """The roles, as a CLI help lists them."""
    return ", ".join(r.value for r in Role)
