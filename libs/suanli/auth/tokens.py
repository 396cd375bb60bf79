"""Signed tokens: Ed25519 keys, JWTs that carry a principal, and their verification.

A token is a JWT (RFC 7519) signed with EdDSA over Ed25519 (PyJWT + `cryptography`), with the claims
``sub`` (subject), ``tenant``, ``roles``, ``exp`` / ``iat`` (seconds), ``jti`` (token id), ``iss`` and
``aud`` (both ``suanli``), and the header ``kid``: the id of the key that signed it (`key_id`). Services
hold only public keys, in a `KeyRing` (the configured file and the ledger's keys); the private key stays
with whoever issues tokens (`suanli auth init` writes it with mode 0600). Times come in as arguments:
callers pass their clock.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from suanli.auth.principal import Principal, Role, check_grant
from suanli.errors import Unauthenticated

ALGORITHM = "EdDSA"
ISSUER = "suanli"
AUDIENCE = "suanli"
PRIVATE_KEY_FILE = "signing-key.pem"
PUBLIC_KEY_FILE = "signing-key.pub.pem"
# Clock skew tolerated between the issuer and a service, seconds.
LEEWAY_S = 5


@dataclass(frozen=True, slots=True)
class KeyPaths:
    """Where a key pair lives: ``<dir>/signing-key.pem`` (0600) and ``<dir>/signing-key.pub.pem``."""

    directory: Path

    @property
    def private(self) -> Path:
        """The private key (PEM, PKCS#8)."""
        return self.directory / PRIVATE_KEY_FILE

    @property
    def public(self) -> Path:
        """The public key (PEM, SubjectPublicKeyInfo) services verify with."""
        return self.directory / PUBLIC_KEY_FILE


def key_id(key: Ed25519PublicKey) -> str:
    """The key's id, the ``kid`` of the tokens it signs: 16 hex digits of the SHA-256 of its raw bytes.

    Derived from the key itself, so an id can never name two keys and a verifier may cache by it.
    """
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_pem(key: Ed25519PublicKey) -> str:
    """The public key as PEM (SubjectPublicKeyInfo): how key files and the ledger hold it."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def parse_public_key(pem: bytes) -> Ed25519PublicKey:
    """The Ed25519 public key in ``pem``."""
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def create_keys(paths: KeyPaths, *, replace: bool = False) -> Ed25519PrivateKey:
    """Write a new Ed25519 key pair (`write_keys`) and return it.

    Refuses to overwrite an existing key unless ``replace`` (rotation: docs/security.md).
    """
    if paths.private.exists() and not replace:
        raise FileExistsError(f"{paths.private} exists (rotate it with `suanli auth key rotate`)")
    key = Ed25519PrivateKey.generate()
    write_keys(paths, key)
    return key


def write_keys(paths: KeyPaths, key: Ed25519PrivateKey) -> None:
    """Write ``key`` and its public key; the private key is created with mode 0600 (never world-readable)."""
    paths.directory.mkdir(parents=True, exist_ok=True)
    paths.directory.chmod(0o700)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    tmp = paths.private.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(private)
    tmp.replace(paths.private)
    paths.public.write_text(public_pem(key.public_key()))


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The signing key at ``path``; refuses a file others can read (it would let them mint tokens)."""
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(f"{path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The verification key at ``path``."""
    try:
        return parse_public_key(path.read_bytes())
    except ValueError:
        raise ValueError(f"{path} is not an Ed25519 public key") from None


@dataclass(frozen=True, slots=True)
class Grant:
    """What a token is issued for; ``token_id`` and times are chosen by the issuer's caller."""

    subject: str
    tenant: str
    roles: frozenset[Role]
    token_id: str
    issued_at_s: int
    expires_at_s: int

    def __post_init__(self) -> None:
        if not self.subject:
            raise ValueError("a token needs a subject")
        check_grant(self.tenant, self.roles)
        if self.expires_at_s <= self.issued_at_s:
            raise ValueError("a token must expire after it is issued")


def sign(grant: Grant, key: Ed25519PrivateKey) -> str:
    """The compact JWT for ``grant``."""
    claims: dict[str, Any] = {
        "sub": grant.subject,
        "tenant": grant.tenant,
        "roles": sorted(r.value for r in grant.roles),
        "jti": grant.token_id,
        "iat": grant.issued_at_s,
        "exp": grant.expires_at_s,
        "iss": ISSUER,
        "aud": AUDIENCE,
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"kid": key_id(key.public_key())})


class KeyRing:
    """The public keys a service trusts, by id, and when each stops being trusted.

    Two sources: the configured key (``SUANLI_AUTH_PUBLIC_KEY``, also the key of tokens without a
    ``kid``, which predate key ids) and the ledger's ``SigningKeyAdded`` / ``SigningKeyRetired`` events
    (`suanli.auth.ledger.LedgerView` folds them in). A retirement applies to every source: a key the
    ledger retired is refused even when it is the configured one.
    """

    def __init__(self, configured: Ed25519PublicKey | None = None) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {}
        self._retired_at: dict[str, float] = {}
        self.configured_id = ""
        if configured is not None:
            self.configured_id = self.add(configured)

    def add(self, key: Ed25519PublicKey) -> str:
        """Trust ``key`` (until retired); its id."""
        kid = key_id(key)
        self._keys[kid] = key
        return kid

    def retire(self, kid: str, at_s: float) -> None:
        """Stop trusting ``kid`` from ``at_s`` on; an earlier retirement already known stays."""
        self._retired_at[kid] = min(at_s, self._retired_at.get(kid, at_s))

    def __len__(self) -> int:
        return len(self._keys)

    def active(self, now_s: float) -> list[str]:
        """The ids of the keys trusted at ``now_s``."""
        return [kid for kid in self._keys if self._retired_at.get(kid, now_s + 1) > now_s]

    def key(self, kid: str) -> Ed25519PublicKey:
        """The key a token's ``kid`` names (empty: the configured key); ``Unauthenticated`` if unknown."""
        found = self._keys.get(kid or self.configured_id)
        if found is None:
            raise Unauthenticated(f"token was signed by an unknown key {kid or '(no kid)'!r}")
        return found

    def check(self, kid: str, now_s: float) -> None:
        """Refuse, at ``now_s``, a token whose key is unknown or retired."""
        self.key(kid)
        retired_at = self._retired_at.get(kid or self.configured_id)
        if retired_at is not None and retired_at <= now_s:
            raise Unauthenticated(f"token was signed by the retired key {kid or self.configured_id!r}")


class TokenVerifier:
    """Checks a token's signature, issuer, audience and expiry and returns its principal.

    Every refusal is ``Unauthenticated`` with a message that says why (expired, bad signature, ...),
    never the token itself. The key is the one the token's ``kid`` names in the `KeyRing` (a single key
    stands for a ring holding only it). The signature check (the costly part: ~0.2-1 ms on a loaded
    2-core machine, docs/BENCHMARKS.md "Authentication") is remembered per exact token string for
    ``cache_size`` tokens: a client sends the same token on every call, and only the identical, already
    verified bytes hit the cache. Times and the key's retirement are checked on every call.
    """

    def __init__(self, keys: Ed25519PublicKey | KeyRing, cache_size: int = 4096) -> None:
        self.keys = keys if isinstance(keys, KeyRing) else KeyRing(keys)
        self._checked = functools.lru_cache(maxsize=cache_size)(self._signed_claims)

    def verify(self, token: str, now_s: float) -> Principal:
        """The principal ``token`` proves at ``now_s`` (seconds since the epoch)."""
        principal, issued_at_s, kid = self._checked(token)
        self.keys.check(kid, now_s)
        if principal.expires_at_s + LEEWAY_S <= now_s:
            raise Unauthenticated("token has expired")
        if issued_at_s - LEEWAY_S > now_s:
            raise Unauthenticated("token is not valid yet (issued in the future)")
        return principal

    def _signed_claims(self, token: str) -> tuple[Principal, int, str]:
        try:
            kid = str(jwt.get_unverified_header(token).get("kid") or "")
            claims = jwt.decode(
                token,
                self.keys.key(kid),
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                leeway=LEEWAY_S,
                # Times are checked in `verify` against the caller's clock (PyJWT would read the system's).
                options={
                    "require": ["exp", "iat", "sub", "jti"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidSignatureError:
            raise Unauthenticated("token signature is not valid (signed by another key?)") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"token is not valid: {exc}") from None
        try:
            roles = frozenset(Role(r) for r in claims.get("roles") or ())
            tenant = str(claims.get("tenant") or "")
            check_grant(tenant, roles)
        except ValueError as exc:
            raise Unauthenticated(f"token grants nothing usable: {exc}") from None
        principal = Principal(str(claims["sub"]), tenant, roles, str(claims["jti"]), int(claims["exp"]))
        return principal, int(claims["iat"]), kid
