"""Where the CLI's servers are and which token it sends: a kubeconfig-like file, the environment, flags.

The file (``SUANLI_CONFIG``, default ``~/.suanli/config.yaml``; `suanli up` writes one in its home)::

    current-context: up
    contexts:
      - name: up
        scheduler: 127.0.0.1:50051
        billing: 127.0.0.1:50055
        routing: 127.0.0.1:50053
        token: eyJhbGciOi...        # or token-file: /path/to/token
        ca: /path/to/ca.pem         # optional: talk TLS, trusting this CA

Precedence, for the token: ``--token`` (root option) > ``SUANLI_TOKEN`` > the context's token; for an
address: the command's flag or its variable (``--scheduler`` / ``SUANLI_SCHEDULER_ADDR``, ...) > the
context's entry > the built-in default. ``--context`` / ``SUANLI_CONTEXT`` picks a context other than
``current-context``. Every channel the CLI opens sends the token as ``authorization: Bearer <token>``;
with a CA (``--ca`` / ``SUANLI_CA`` > the context's ``ca``) the channel is TLS and verifies the server
against it, else it is plaintext.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml

CONFIG_ENV = "SUANLI_CONFIG"
TOKEN_ENV = "SUANLI_TOKEN"
CONTEXT_ENV = "SUANLI_CONTEXT"
CA_ENV = "SUANLI_CA"
DEFAULT_CONFIG = Path("~/.suanli/config.yaml")
SERVERS = ("scheduler", "billing", "routing")


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Context:
    """One named context: the servers to talk to and the token to send."""

    name: str
    servers: dict[str, str] = field(default_factory=dict)
    token: str = ""
    ca: str = ""  # path of the CA certificate to trust (TLS); empty: plaintext


@dataclass
class Selection:
    """What the root command line chose (``--token``, ``--context``, ``--config``); None: not given."""

    token: str | None = None
    context: str | None = None
    config: Path | None = None
    ca: Path | None = None


SELECTED = Selection()


def config_path() -> Path:
    """The config file in use: ``--config``, else ``SUANLI_CONFIG``, else ``~/.suanli/config.yaml``."""
    given = SELECTED.config or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    return Path(given).expanduser()


def _context(path: Path, raw: Any) -> Context:
    if not isinstance(raw, dict) or not raw.get("name"):
        raise ConfigError(f"{path}: every context needs a name")
    token = str(raw.get("token") or "")
    if not token and raw.get("token-file"):
        token = Path(str(raw["token-file"])).expanduser().read_text().strip()
    servers = {k: str(raw[k]) for k in SERVERS if raw.get(k)}
    return Context(str(raw["name"]), servers, token, str(raw.get("ca") or ""))


def active_context() -> Context | None:
    """The selected context of the config file, or None when there is no file."""
    path = config_path()
    if not path.exists():
        if SELECTED.context:
            raise ConfigError(f"--context {SELECTED.context}: no config file at {path}")
        return None
    data = read_config(path)
    contexts = {c.name: c for c in (_context(path, raw) for raw in data.get("contexts") or [])}
    wanted = SELECTED.context or os.environ.get(CONTEXT_ENV) or data.get("current-context")
    if not wanted:
        return None
    if wanted not in contexts:
        raise ConfigError(f"{path}: no context {wanted!r} (known: {', '.join(sorted(contexts)) or 'none'})")
    return contexts[wanted]


def token() -> str:
    """The token to send: ``--token`` > ``SUANLI_TOKEN`` > the context's; empty when there is none."""
    if SELECTED.token:
        return SELECTED.token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    context = active_context()
    return context.token if context else ""


def ca() -> bytes | None:
    """The CA certificate to trust: ``--ca`` / ``SUANLI_CA`` > the context's ``ca``; None: plaintext."""
    path: Path | None = SELECTED.ca
    if path is None:
        context = active_context()
        path = Path(context.ca).expanduser() if context and context.ca else None
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"CA certificate {path}: {exc.strerror or exc}") from None


def server(kind: str, given: str, builtin: str) -> str:
    """The address of ``kind``: the flag or its variable, else the context's, else ``builtin``."""
    if given:
        return given
    context = active_context()
    return (context.servers.get(kind) if context else None) or builtin


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call."""

    def __init__(self, value: str) -> None:
        self._metadata = (("authorization", f"Bearer {value}"),)

    def _details(self, details: Any) -> Any:
        metadata = (*(details.metadata or ()), *self._metadata)
        return _Details(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)


@dataclass(frozen=True)
class _Details(grpc.ClientCallDetails):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None


def bearer_channel(address: str, value: str, ca_pem: bytes | None = None) -> grpc.Channel:
    """A channel to ``address`` that sends ``value`` as its bearer token (empty: none); TLS trusting
    ``ca_pem`` when given, else plaintext."""
    base = (
        grpc.insecure_channel(address)
        if ca_pem is None
        else grpc.secure_channel(address, _credentials(ca_pem))
    )
    return grpc.intercept_channel(base, _Bearer(value)) if value else base


def channel(address: str) -> grpc.Channel:
    """A channel to ``address`` with the selected token and CA (none: no token, plaintext)."""
    return bearer_channel(address, token(), ca())


def read_config(path: Path) -> dict[str, Any]:
    """The file's document (empty when there is no file); `ConfigError` when it is not a config."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("contexts") or [], list):
        raise ConfigError(f"{path}: not a client config (a mapping with a list of contexts)")
    return data


def save_config(path: Path, data: dict[str, Any]) -> None:
    """Write the document to ``path``, readable by its owner only (it holds tokens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(data, out, sort_keys=False)
    path.chmod(0o600)


def context_entry(context: Context) -> dict[str, Any]:
    """How ``context`` is written in the file."""
    entry: dict[str, Any] = {"name": context.name, **context.servers}
    if context.token:
        entry["token"] = context.token
    if context.ca:
        entry["ca"] = context.ca
    return entry


def write_context(path: Path, context: Context, *, current: bool = True) -> None:
    """Write (or replace) ``context`` in the file at ``path``, current unless told otherwise (0600)."""
    data = read_config(path)
    others = [c for c in data.get("contexts") or [] if isinstance(c, dict) and c.get("name") != context.name]
    data["contexts"] = [*others, context_entry(context)]
    if current or not data.get("current-context"):
        data["current-context"] = context.name
    save_config(path, data)


class _AioMetadata:
    """Adds the bearer header to a grpc.aio call's details."""

    def __init__(self, value: str) -> None:
        self._metadata = (("authorization", f"Bearer {value}"),)

    def _details(self, details: Any) -> grpc.aio.ClientCallDetails:
        metadata = (*(details.metadata or ()), *self._metadata)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class _AioBearerUnary(_AioMetadata, grpc.aio.UnaryUnaryClientInterceptor):
    """The asyncio twin of `_Bearer` for unary calls (grpc.aio files an interceptor under one kind only)."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


class _AioBearerStream(_AioMetadata, grpc.aio.UnaryStreamClientInterceptor):
    """The same for server-streaming calls (WatchJob, WatchNetwork)."""

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


def aio_bearer_channel(address: str, value: str, ca_pem: bytes | None = None) -> grpc.aio.Channel:
    """A grpc.aio channel to ``address`` that sends ``value`` as its bearer token (empty: none); TLS
    trusting ``ca_pem`` when given, else plaintext."""
    interceptors = [_AioBearerUnary(value), _AioBearerStream(value)] if value else None
    if ca_pem is None:
        return grpc.aio.insecure_channel(address, interceptors=interceptors)
    return grpc.aio.secure_channel(address, _credentials(ca_pem), interceptors=interceptors)


def _credentials(ca_pem: bytes) -> grpc.ChannelCredentials:
    # Imported on use: the TLS helpers load cryptography, which plaintext commands never need.
    from suanli.auth.tls import channel_credentials

    return channel_credentials(ca_pem)
