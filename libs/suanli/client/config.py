"""The client config file, read by the CLI and `SchedulerClient.from_config`: contexts, like a kubeconfig.

The file (``SUANLI_CONFIG``, default ``$XDG_CONFIG_HOME/suanli/config.yaml``, that is
``~/.config/suanli/config.yaml``, or an older ``~/.suanli/config.yaml`` while the new one does not exist;
`suanli up` writes one in its home)::

    current-context: up
    contexts:
      - name: up
        scheduler: 127.0.0.1:50051
        billing: 127.0.0.1:50055
        routing: 127.0.0.1:50053
        traces: http://127.0.0.1:16686   # optional: where `suanli job trace` reads spans
        token: eyJhbGciOi...        # or token-file: /path/to/token
        ca: /path/to/ca.pem         # optional: talk TLS, trusting this CA

``SUANLI_CONTEXT`` picks a context other than ``current-context``; ``SUANLI_TOKEN`` and ``SUANLI_CA``
override the context's token and CA. The CLI adds its flags on top (`suanli.cli.config`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONFIG_ENV = "SUANLI_CONFIG"
TOKEN_ENV = "SUANLI_TOKEN"
CONTEXT_ENV = "SUANLI_CONTEXT"
CA_ENV = "SUANLI_CA"
XDG_CONFIG_ENV = "XDG_CONFIG_HOME"
# Where the file was before it followed the XDG base directories: a user's contexts there keep working.
LEGACY_CONFIG = Path("~/.suanli/config.yaml")
# `traces`: the base URL of a Jaeger query API (compose: Jaeger's :16686; `suanli up`: its trace store).
SERVERS = ("scheduler", "billing", "routing", "serving", "traces")


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Context:
    """One named context: the servers to talk to and the token to send."""

    name: str
    servers: dict[str, str] = field(default_factory=dict)
    token: str = ""
    ca: str = ""  # path of the CA certificate to trust (TLS); empty: plaintext


def default_config_path() -> Path:
    """The file when neither an argument nor ``SUANLI_CONFIG`` names one.

    ``$XDG_CONFIG_HOME/suanli/config.yaml`` (``~/.config`` when unset), unless only the legacy
    ``~/.suanli/config.yaml`` exists: then that one, for reading and writing alike, so a user's contexts
    stay in one file until they move it.
    """
    base = os.environ.get(XDG_CONFIG_ENV, "")
    # The XDG spec: a relative value is invalid and is ignored.
    root = Path(base) if os.path.isabs(base) else Path("~/.config").expanduser()
    new = root / "suanli" / "config.yaml"
    legacy = LEGACY_CONFIG.expanduser()
    return legacy if not new.exists() and legacy.exists() else new


def config_path(given: str | Path | None = None) -> Path:
    """The config file: ``given``, else ``SUANLI_CONFIG``, else `default_config_path`."""
    chosen = given or os.environ.get(CONFIG_ENV)
    return Path(chosen).expanduser() if chosen else default_config_path()


def _context(path: Path, raw: Any) -> Context:
    if not isinstance(raw, dict) or not raw.get("name"):
        raise ConfigError(f"{path}: every context needs a name")
    token = str(raw.get("token") or "")
    if not token and raw.get("token-file"):
        token = Path(str(raw["token-file"])).expanduser().read_text().strip()
    servers = {k: str(raw[k]) for k in SERVERS if raw.get(k)}
    return Context(str(raw["name"]), servers, token, str(raw.get("ca") or ""))


def read_config(file: Path) -> dict[str, Any]:
    """The file's document (empty when there is no file); `ConfigError` when it is not a config."""
    if not file.exists():
        return {}
    try:
        data = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("contexts") or [], list):
        raise ConfigError(f"{file}: not a client config (a mapping with a list of contexts)")
    return data


def load_context(path: str | Path | None = None, name: str | None = None) -> Context | None:
    """Context ``name`` (else ``SUANLI_CONTEXT``, else the file's ``current-context``) of the file.

    ``path``: the file (`config_path` decides when None). None when there is no file or it names no
    context; `ConfigError` when it cannot be used.
    """
    file = config_path(path)
    if not file.exists():
        if name:
            raise ConfigError(f"--context {name}: no config file at {file}")
        return None
    data = read_config(file)
    contexts = {c.name: c for c in (_context(file, raw) for raw in data.get("contexts") or [])}
    wanted = name or os.environ.get(CONTEXT_ENV) or data.get("current-context")
    if not wanted:
        return None
    if wanted not in contexts:
        raise ConfigError(f"{file}: no context {wanted!r} (known: {', '.join(sorted(contexts)) or 'none'})")
    return contexts[wanted]


def read_ca(path: str | Path) -> bytes:
    """The CA certificate at ``path``; `ConfigError` names the file when it cannot be read."""
    file = Path(path).expanduser()
    try:
        return file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"CA certificate {file}: {exc.strerror or exc}") from None
