"""Tokens: keys written safely, claims round-trip, and every way a token can be bad is refused precisely."""

from __future__ import annotations

import stat
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suanli.auth.principal import Principal, Role
from suanli.auth.tokens import (
    Grant,
    KeyPaths,
    TokenVerifier,
    create_keys,
    key_id,
    load_private_key,
    load_public_key,
    sign,
)
from suanli.errors import Unauthenticated

NOW = 1_800_000_000


@pytest.fixture
def keys(tmp_path: Path) -> KeyPaths:
    paths = KeyPaths(tmp_path / "auth")
    create_keys(paths)
    return paths


def grant(**changes: object) -> Grant:
    fields: dict[str, object] = {
        "subject": "alice",
        "tenant": "acme",
        "roles": frozenset({Role.TENANT_MEMBER}),
        "token_id": "tok-1",
        "issued_at_s": NOW,
        "expires_at_s": NOW + 3600,
    }
    return Grant(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_private_key_is_0600_in_a_0700_directory_and_is_not_overwritten(keys: KeyPaths) -> None:
    assert stat.S_IMODE(keys.private.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.directory.stat().st_mode) == 0o700
    with pytest.raises(FileExistsError, match="suanli auth key rotate"):
        create_keys(keys)
    before = keys.public.read_bytes()
    create_keys(keys, replace=True)
    assert keys.public.read_bytes() != before


def test_a_key_others_can_read_is_refused(keys: KeyPaths) -> None:
    keys.private.chmod(0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        load_private_key(keys.private)


def test_a_signed_token_names_its_principal_and_its_key(keys: KeyPaths) -> None:
    token = sign(grant(), load_private_key(keys.private))
    assert jwt.get_unverified_header(token)["kid"] == key_id(load_public_key(keys.public))
    principal = TokenVerifier(load_public_key(keys.public)).verify(token, NOW + 10)
    assert principal == Principal("alice", "acme", frozenset({Role.TENANT_MEMBER}), "tok-1", NOW + 3600)
    assert principal.label == "alice@acme#tok-1"
    assert principal.sees("acme") and not principal.sees("globex") and not principal.platform_wide


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda key: sign(grant(), key), "token has expired"),
        (lambda key: sign(grant(), Ed25519PrivateKey.generate()), "token was signed by an unknown key"),
        # Signed by another key but claiming the trusted key's id: the signature check refuses it.
        (
            lambda key: jwt.encode(
                {"sub": "a", "jti": "x", "iat": NOW, "exp": NOW + 9e9, "iss": "suanli", "aud": "suanli"},
                Ed25519PrivateKey.generate(),
                "EdDSA",
                headers={"kid": key_id(key.public_key())},
            ),
            "token signature is not valid",
        ),
        (lambda key: "not.a.jwt", "token is not valid"),
        (
            lambda key: jwt.encode(
                {"sub": "a", "jti": "x", "iat": NOW, "exp": NOW + 9e9, "aud": "suanli"}, key, "EdDSA"
            ),
            'token is not valid: Token is missing the "iss" claim',
        ),
        (
            lambda key: jwt.encode(
                {
                    "sub": "a",
                    "jti": "x",
                    "iat": NOW,
                    "exp": NOW + 9e9,
                    "iss": "suanli",
                    "aud": "suanli",
                    "roles": ["root"],
                },
                key,
                "EdDSA",
            ),
            "token grants nothing usable",
        ),
        (
            lambda key: jwt.encode(
                {
                    "sub": "a",
                    "jti": "x",
                    "iat": NOW,
                    "exp": NOW + 9e9,
                    "iss": "suanli",
                    "aud": "suanli",
                    "roles": ["viewer"],
                },
                key,
                "EdDSA",
            ),
            "token grants nothing usable: role viewer needs a tenant",
        ),
        # An HMAC token "signed" with the public key: the classic algorithm-confusion attack.
        (lambda key: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.x", "token is not valid"),
    ],
)
def test_bad_tokens_are_unauthenticated_with_the_reason(keys: KeyPaths, make, message: str) -> None:  # type: ignore[no-untyped-def]
    token = make(load_private_key(keys.private))
    verifier = TokenVerifier(load_public_key(keys.public))
    with pytest.raises(Unauthenticated) as refused:
        verifier.verify(token, NOW + 7200)
    assert str(refused.value).startswith(message)


def test_a_token_from_the_future_is_refused(keys: KeyPaths) -> None:
    token = sign(grant(issued_at_s=NOW + 600, expires_at_s=NOW + 3600), load_private_key(keys.private))
    with pytest.raises(Unauthenticated, match="issued in the future"):
        TokenVerifier(load_public_key(keys.public)).verify(token, NOW)


def test_grants_that_cannot_be_honoured_are_refused_at_issue() -> None:
    with pytest.raises(ValueError, match="needs a tenant"):
        grant(tenant="")
    with pytest.raises(ValueError, match="at least one role"):
        grant(roles=frozenset())
    with pytest.raises(ValueError, match="one queue segment"):
        grant(tenant="acme/team")
    with pytest.raises(ValueError, match="expire after"):
        grant(expires_at_s=NOW)
    assert grant(tenant="", roles=frozenset({Role.PLATFORM_ADMIN})).tenant == ""
