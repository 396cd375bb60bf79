"""Where the CLI's servers are and which token it sends: a kubeconfig-like file, the environment, flags.

The file (``SUANLI_CONFIG``, default ``~/.config/suanli/config.yaml`` or the legacy
``~/.suanli/config.yaml``: `suanli.client.config.default_config_path`; `suanli up` writes one in its home)::

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

# The file format and its reader are the client library's (suanli.client), so programs read it alike.
from suanli.client import config as _file
from suanli.client.channel import aio_bearer_channel, credentials
from suanli.client.config import (
    CA_ENV,
    CONFIG_ENV,
    CONTEXT_ENV,
    LEGACY_CONFIG,
    SERVERS,
    TOKEN_ENV,
    ConfigError,
    Context,
    read_config,
)

__all__ = [
    "CA_ENV",
    "CONFIG_ENV",
    "CONTEXT_ENV",
    "LEGACY_CONFIG",
    "SELECTED",
    "SERVERS",
    "TOKEN_ENV",
    "ConfigError",
    "Context",
    "Selection",
    "active_context",
    "aio_bearer_channel",
    "bearer_channel",
    "ca",
    "channel",
    "config_path",
    "context_entry",
    "read_config",
    "save_config",
    "server",
    "token",
    "write_context",
]


@dataclass
class Selection:
    """What the root command line chose (``--token``, ``--context``, ``--config``); None: not given."""

    token: str | None = None
    context: str | None = None
    config: Path | None = None
    ca: Path | None = None


SELECTED = Selection()


def config_path() -> Path:
    """The config file in use: ``--config``, else ``SUANLI_CONFIG``, else the default (XDG, or legacy)."""
    return _file.config_path(SELECTED.config)


def active_context() -> Context | None:
    """The selected context of the config file, or None when there is no file."""
    return _file.load_context(config_path(), SELECTED.context)


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
    return _file.read_ca(path)


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
        else grpc.secure_channel(address, credentials(ca_pem))
    )
    return grpc.intercept_channel(base, _Bearer(value)) if value else base


def channel(address: str) -> grpc.Channel:
    """A channel to ``address`` with the selected token and CA (none: no token, plaintext)."""
    return bearer_channel(address, token(), ca())


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
