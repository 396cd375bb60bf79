"""Signing keys as ledger events: a token's kid picks its key, rotation keeps both keys valid until the old
one is retired, and retired or unknown keys are refused (the ledger in memory, the verifier as services
build it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suanli.auth.ledger import LedgerView, TokenLedger
from suanli.auth.principal import Role
from suanli.auth.tokens import Grant, KeyRing, TokenVerifier, key_id, sign
from suanli.clock import ManualClock, to_ms
from suanli.errors import FailedPrecondition, NotFound, Unauthenticated
from suanli.eventstore.memory import InMemoryEventStore

START = datetime(2027, 1, 1, tzinfo=UTC)


def _now_s(clock: ManualClock) -> float:
    return to_ms(clock.now()) / 1000


def _token(key: Ed25519PrivateKey, clock: ManualClock, token_id: str = "tok-1") -> str:
    now = int(_now_s(clock))
    return sign(Grant("svc", "", frozenset({Role.SERVICE}), token_id, now, now + 86400), key)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(clock: ManualClock) -> InMemoryEventStore:
    return InMemoryEventStore(clock=clock)


@pytest.fixture
def ledger(store: InMemoryEventStore, clock: ManualClock) -> TokenLedger:
    return TokenLedger(store, clock)


def _service_view(store: InMemoryEventStore, configured: Ed25519PrivateKey | None = None) -> LedgerView:
    """What a service builds: a ring with its configured key (if any), kept current from the ledger."""
    return LedgerView(store, keys=KeyRing(None if configured is None else configured.public_key()))


def test_the_kid_picks_the_key_among_several() -> None:
    first, second = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    ring = KeyRing()
    assert ring.add(first.public_key()) == key_id(first.public_key())
    ring.add(second.public_key())
    verifier = TokenVerifier(ring)
    clock = ManualClock(START)
    for key, name in ((first, "first"), (second, "second")):
        token = _token(key, clock, f"tok-{name}")
        assert jwt.get_unverified_header(token)["kid"] == key_id(key.public_key())
        assert verifier.verify(token, _now_s(clock)).token_id == f"tok-{name}"
    assert key_id(first.public_key()) != key_id(second.public_key())


def test_a_token_without_kid_is_checked_with_the_configured_key() -> None:
    key = Ed25519PrivateKey.generate()
    now = int(_now_s(ManualClock(START)))
    # What tokens issued before key ids looked like: no kid header.
    legacy = jwt.encode(
        {"sub": "a", "jti": "tok-old", "iat": now, "exp": now + 60, "iss": "suanli", "aud": "suanli",
         "roles": ["service"]},
        key,
        "EdDSA",
    )  # fmt: skip
    assert "kid" not in jwt.get_unverified_header(legacy)
    assert TokenVerifier(key.public_key()).verify(legacy, now).token_id == "tok-old"
    with pytest.raises(Unauthenticated, match=r"unknown key '\(no kid\)'"):
        TokenVerifier(KeyRing()).verify(legacy, now)


async def test_rotation_keeps_both_keys_valid_until_the_old_one_is_retired(
    store: InMemoryEventStore, ledger: TokenLedger, clock: ManualClock
) -> None:
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    # The service was configured with the old key's file, before the rotation recorded anything.
    view = _service_view(store, configured=old)
    await view.refresh()
    verifier = TokenVerifier(view.keys)
    old_token = _token(old, clock, "tok-old")
    assert verifier.verify(old_token, _now_s(clock)).token_id == "tok-old"

    # Rotation: both keys recorded (the old one once only), the old one retired an hour from now.
    assert await ledger.add_key(old.public_key(), "ops") is True
    assert await ledger.add_key(old.public_key(), "ops") is False
    assert await ledger.add_key(new.public_key(), "ops") is True
    new_token = _token(new, clock, "tok-new")
    with pytest.raises(Unauthenticated, match="unknown key"):
        verifier.verify(new_token, _now_s(clock))  # not refreshed yet: the new key is not known
    retires = await ledger.retire_key(key_id(old.public_key()), "ops", after_s=3600, reason="rotated")
    assert retires == START + timedelta(hours=1)
    await view.refresh()
    assert verifier.verify(new_token, _now_s(clock)).token_id == "tok-new"
    assert verifier.verify(old_token, _now_s(clock)).token_id == "tok-old"  # the grace period

    clock.advance(timedelta(hours=1))
    with pytest.raises(Unauthenticated, match=f"retired key '{key_id(old.public_key())}'"):
        verifier.verify(old_token, _now_s(clock))  # cached signature or not: retirement is checked per call
    assert verifier.verify(new_token, _now_s(clock)).token_id == "tok-new"
    with pytest.raises(FailedPrecondition, match="is retired"):
        await ledger.issue(old, "x", "", frozenset({Role.SERVICE}), 60, "ops")

    # A service started afterwards, configured with the new key's file, agrees.
    fresh = _service_view(store, configured=new)
    await fresh.refresh()
    with pytest.raises(Unauthenticated, match="retired key"):
        TokenVerifier(fresh.keys).verify(old_token, _now_s(clock))
    assert fresh.keys.active(_now_s(clock)) == [key_id(new.public_key())]

    listed = {k.key_id: k for k in await ledger.keys()}
    assert listed[key_id(old.public_key())].status(clock.now()) == "retired"
    assert listed[key_id(old.public_key())].reason == "rotated"
    assert listed[key_id(new.public_key())].status(clock.now()) == "active"
    assert [t.token_id for t in await ledger.tokens()] == []  # key events are not tokens


async def test_a_retirement_can_be_brought_forward_never_put_off(
    store: InMemoryEventStore, ledger: TokenLedger, clock: ManualClock
) -> None:
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    with pytest.raises(NotFound, match="no signing key"):
        await ledger.retire_key(kid, "ops")
    await ledger.add_key(key.public_key(), "ops")
    await ledger.retire_key(kid, "ops", after_s=86400)
    (record,) = await ledger.keys()
    assert record.status(clock.now()) == "retiring"
    with pytest.raises(FailedPrecondition, match="already retired"):
        await ledger.retire_key(kid, "ops", after_s=2 * 86400)
    await ledger.retire_key(kid, "ops", reason="leaked")  # now: the key leaked during its grace period
    (record,) = await ledger.keys()
    assert record.status(clock.now()) == "retired" and record.retired_at == START
    view = _service_view(store)
    await view.refresh()
    with pytest.raises(Unauthenticated, match="retired key"):
        TokenVerifier(view.keys).verify(_token(key, clock), _now_s(clock))


async def test_a_retired_configured_key_is_refused_too(
    store: InMemoryEventStore, ledger: TokenLedger, clock: ManualClock
) -> None:
    key = Ed25519PrivateKey.generate()
    view = _service_view(store, configured=key)
    await ledger.add_key(key.public_key(), "ops")
    await ledger.retire_key(key_id(key.public_key()), "ops")
    await view.refresh()
    with pytest.raises(Unauthenticated, match="retired key"):
        TokenVerifier(view.keys).verify(_token(key, clock), _now_s(clock))
