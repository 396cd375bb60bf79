"""Talking to the scheduler from the CLI: where it is, one channel per command, and failures as
one-line messages with an exit code (never a traceback).

Exit codes, so scripts can tell outcomes apart:
  0 done / job succeeded, 1 the job failed or was cancelled, 2 bad usage or an invalid spec file,
  3 the scheduler refused the request, 4 the scheduler cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import grpc
import typer
from rich.console import Console

from suanli.api.scheduler.v1 import scheduler_pb2_grpc
from suanli.cli import config

if TYPE_CHECKING:
    from suanli.client import SchedulerClient
    from suanli.jobspec import JobSpecError

ADDRESS_ENV = "SUANLI_SCHEDULER_ADDR"
BUILTIN_ADDRESS = "127.0.0.1:50051"
# Not given: the config file's context decides, else BUILTIN_ADDRESS (suanli.cli.config).
DEFAULT_ADDRESS = ""
# Unary calls answer from the scheduler's state, so a slow answer means trouble, not work in progress.
UNARY_TIMEOUT_S = 30.0

EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_UNREACHABLE = 4

SchedulerOption = Annotated[
    str,
    typer.Option(
        "--scheduler",
        envvar=ADDRESS_ENV,
        metavar="HOST:PORT",
        help=f"Scheduler gRPC address (env {ADDRESS_ENV}; default: the config context's, else "
        f"{BUILTIN_ADDRESS}).",
        show_default=False,
    ),
]

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    exit_code: int


def rpc_failure(error: grpc.RpcError, address: str, service: str = "scheduling") -> Failure:
    """A gRPC error as the line a person reads; UNAVAILABLE almost always means nothing is listening."""
    code: grpc.StatusCode = error.code()
    if code is grpc.StatusCode.UNAUTHENTICATED:
        details = (error.details() or "").strip()
        return Failure(
            f"UNAUTHENTICATED: {details} (pass --token, set {config.TOKEN_ENV} or a context in "
            f"{config.config_path()})",
            EXIT_REFUSED,
        )
    if code is grpc.StatusCode.UNAVAILABLE:
        # From the errors module, not suanli.rpc: that one loads the broker and database clients.
        from suanli.errors import DEPENDENCY_UNAVAILABLE

        details = (error.details() or "").strip()
        if details.startswith(DEPENDENCY_UNAVAILABLE):  # it answered: its database or broker is away
            return Failure(f"UNAVAILABLE: {details}", EXIT_UNREACHABLE)
        who = "the scheduler" if service == "scheduling" else f"the {service} service"
        tls_hint = "" if config.ca() else f"; if it serves TLS, pass --ca or set {config.CA_ENV}"
        return Failure(
            f"cannot reach {who} at {address} (is `suanli serve {service}` running?{tls_hint})",
            EXIT_UNREACHABLE,
        )
    details = (error.details() or "").strip()
    return Failure(f"{code.name}: {details}" if details else code.name, EXIT_REFUSED)


def spec_failure(error: JobSpecError) -> Failure:
    where = f"{error.source}: " if error.source else ""
    if len(error.problems) == 1:
        return Failure(f"invalid job spec {where}{error.problems[0]}", EXIT_USAGE)
    lines = "\n".join(f"  {p}" for p in error.problems)
    return Failure(f"invalid job spec {where}{len(error.problems)} problems\n{lines}", EXIT_USAGE)


def fail(failure: Failure) -> typer.Exit:
    stderr.print(f"error: {failure.message}", markup=False)
    return typer.Exit(failure.exit_code)


@contextmanager
def reported(address: str) -> Iterator[None]:
    """Turn the failures a command expects into a message and an exit code."""
    try:
        yield
    except grpc.RpcError as exc:
        raise fail(rpc_failure(exc, scheduler_address(address))) from None
    except config.ConfigError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    except ValueError as exc:
        from suanli.jobspec import JobSpecError  # on use: the spec models load pydantic

        if not isinstance(exc, JobSpecError):
            raise
        raise fail(spec_failure(exc)) from None


def scheduler_address(given: str) -> str:
    """The scheduler's address: the flag or its variable, else the config context's, else the default."""
    return config.server("scheduler", given, BUILTIN_ADDRESS)


def scheduler_client(address: str) -> SchedulerClient:
    """The client library (`suanli.client`) on the CLI's address, token and CA; a person waits, so a
    write answered UNAVAILABLE (a standby, a restart) is tried only a few times before it is reported."""
    from suanli.client import Retry, SchedulerClient

    return SchedulerClient(
        scheduler_address(address),
        token=config.token(),
        ca_pem=config.ca(),
        deadline_s=UNARY_TIMEOUT_S,
        retry=Retry(attempts=3),
    )


@contextmanager
def scheduler(address: str) -> Iterator[scheduler_pb2_grpc.SchedulerStub]:
    """A stub on a fresh channel, with errors reported; the channel closes when the command ends."""
    with reported(address), config.channel(scheduler_address(address)) as channel:
        yield scheduler_pb2_grpc.SchedulerStub(channel)
