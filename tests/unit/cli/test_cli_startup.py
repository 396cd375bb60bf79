"""`suanli --help` and `suanli job list` start fast (target 0.5 s, docs/BENCHMARKS.md "CLI start-up")
because they import only what they use. Checked deterministically, without a clock: `python -X importtime`
lists every module a run imports, and the heavy ones below must not be among them.

What is left on these paths is needed: typer (and the pydantic it coerces every option with), rich, and
for a command grpc, the scheduler's stubs and yaml. The modules here cost about 45 to 370 ms each when one
slips in through a module-level import.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass

import pytest

# The heavy modules no listing nor help needs, and who needs them.
HEAVY = {
    "cryptography": "TLS certificates: servers, `suanli dev tls`, `suanli auth`",
    "suanli.auth.tls": "the TLS helpers, which load cryptography",
    "jwt": "signing and verifying tokens: servers and `suanli auth`",
    "suanli.rpc": "the servers' gRPC plumbing; it loads the broker and database clients",
    "aiokafka": "the broker client: services, `suanli dlq`, `suanli doctor`",
    "asyncpg": "the database client: services, `suanli audit`, `suanli outbox`",
    "faust": "stream processing in the services",
    "opentelemetry.sdk": "tracing in the services",
    "suanli.telemetry": "the services' metrics and tracing",
    "numpy": "the simulator and the placement policies",
    "pydantic_settings": "the services' settings",
    "aiohttp": "the web console",
    "suanli.jobspec": "the job spec models: `job submit`",
    "suanli.client.scheduler": "the client library, for `job submit/cancel/watch`",
}
# The root help lists the commands from a table: not even what a command needs.
COMMAND_ONLY = {
    "grpc": "calling a server",
    "google.protobuf": "the API's messages",
    "suanli.api": "the generated stubs",
    "yaml": "reading the client config",
    "pydantic": "typer coerces a command's options with it",
    "asyncio": "grpc's aio and the streaming commands",
}


@dataclass(frozen=True)
class Imported:
    name: str
    cumulative_us: int
    depth: int


def imports(*args: str) -> list[Imported]:
    """The modules `suanli ARGS` imports, in the order `-X importtime` reports them (a module after
    the modules it imported)."""
    env = {**os.environ, "SUANLI_CONFIG": os.devnull, "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "suanli.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    found = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.split("|", 2)
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        found.append(Imported(name.strip(), int(cumulative), depth))
    assert found, done.stderr
    return found


def _forbidden(name: str, forbidden: dict[str, str]) -> str | None:
    return next((f for f in forbidden if name == f or name.startswith(f + ".")), None)


def offenders(found: list[Imported], forbidden: dict[str, str]) -> list[str]:
    """Each forbidden module imported by an allowed one (the place to make lazy), with its cumulative
    time and the chain of modules that imported it."""
    lines = []
    for at, module in enumerate(found):
        root = _forbidden(module.name, forbidden)
        if root is None:
            continue
        chain, depth = [], module.depth
        for later in found[at + 1 :]:
            if later.depth < depth:
                chain.append(later.name)
                depth = later.depth
        if any(_forbidden(importer, forbidden) for importer in chain):
            continue  # it came with a forbidden module: that one is reported
        lines.append(
            f"{module.name} ({module.cumulative_us / 1000:.0f} ms; needed for {forbidden[root]}) "
            f"imported by {' <- '.join(chain) or 'the command module'}"
        )
    return lines


@pytest.fixture(scope="module")
def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_the_root_help_imports_no_command_and_nothing_heavy() -> None:
    found = imports("--help")
    assert offenders(found, HEAVY | COMMAND_ONLY) == []
    assert not any(m.name.startswith("suanli.cli.") and m.name != "suanli.cli.main" for m in found)


@pytest.mark.parametrize("args", [["job", "list", "--help"], ["job", "list"]], ids=["help", "list"])
def test_job_list_and_its_help_import_nothing_heavy(args: list[str], closed_address: str) -> None:
    # Listing against nothing listening: the refused connection's error path too (exit 4).
    found = imports(*args, *(["--scheduler", closed_address] if "--help" not in args else []))
    assert offenders(found, HEAVY) == []
    assert "grpc" in {m.name for m in found}  # the command did load, so the check saw its imports


def test_an_offender_is_named_with_its_time_and_importers() -> None:
    found = [
        Imported("cryptography.x509", 90_000, 3),
        Imported("suanli.auth.tls", 100_000, 2),
        Imported("suanli.rpc", 180_000, 1),
        Imported("suanli.cli.client", 200_000, 0),
        Imported("numpy", 150_000, 0),
        Imported("grpc", 20_000, 0),
    ]
    assert offenders(found, HEAVY) == [
        "suanli.rpc (180 ms; needed for the servers' gRPC plumbing; it loads the broker and database "
        "clients) imported by suanli.cli.client",
        "numpy (150 ms; needed for the simulator and the placement policies) imported by the command module",
    ]
