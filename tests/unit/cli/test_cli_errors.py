"""Failures as one line and an exit code: gRPC status mapping, spec errors, an unreachable scheduler.

No scheduler is running here: every command is driven up to its first RPC against a closed port, which
is the real connection-refused path a user meets.
"""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from suanli.cli.client import (
    ADDRESS_ENV,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Failure,
    rpc_failure,
    spec_failure,
)
from suanli.cli.main import app
from suanli.jobspec import JobSpecError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "jobs"
runner = CliRunner()


def rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.RpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.fixture
def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            "spec.tasks[0].resources.gpu_milli: must be 1..1000",
            Failure("INVALID_ARGUMENT: spec.tasks[0].resources.gpu_milli: must be 1..1000", EXIT_REFUSED),
        ),
        (
            grpc.StatusCode.NOT_FOUND,
            "job j-1 not found\n",
            Failure("NOT_FOUND: job j-1 not found", EXIT_REFUSED),
        ),
        (grpc.StatusCode.ALREADY_EXISTS, "", Failure("ALREADY_EXISTS", EXIT_REFUSED)),
        (
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses",
            Failure(
                "cannot reach the scheduler at h:1 (is `suanli serve scheduling` running?; "
                "if it serves TLS, pass --ca or set SUANLI_CA)",
                EXIT_UNREACHABLE,
            ),
        ),
        (  # it answered, but its database is away: say so, not "cannot reach"
            grpc.StatusCode.UNAVAILABLE,
            "a dependency of this service is unavailable, retry shortly (FileNotFoundError: x)",
            Failure(
                "UNAVAILABLE: a dependency of this service is unavailable, retry shortly "
                "(FileNotFoundError: x)",
                EXIT_UNREACHABLE,
            ),
        ),
    ],
)
def test_rpc_failure(code: grpc.StatusCode, details: str, expected: Failure) -> None:
    assert rpc_failure(rpc_error(code, details), "h:1") == expected


def test_spec_failure_lists_every_problem() -> None:
    one = spec_failure(JobSpecError(["name: required"], "job.yaml"))
    assert one == Failure("invalid job spec job.yaml: name: required", EXIT_USAGE)
    many = spec_failure(JobSpecError(["name: required", "tasks: required"], "job.yaml"))
    assert many.message == "invalid job spec job.yaml: 2 problems\n  name: required\n  tasks: required"


COMMANDS = [
    ["job", "submit", str(EXAMPLES / "training-gang.yaml")],
    ["job", "get", "j-1"],
    ["job", "list", "--state", "running"],
    ["job", "cancel", "j-1", "--reason", "done"],
    ["job", "watch", "j-1"],
    ["job", "explain", "j-1"],
    ["job", "describe", "j-1"],
    ["acct", "--no-charges"],
    ["nodes", "--region", "cn-east"],
    ["queues"],
    ["queues", "acme/vision"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_unreachable_scheduler_is_one_line(args: list[str], closed_address: str) -> None:
    result = runner.invoke(app, [*args, "--scheduler", closed_address])
    assert result.exit_code == EXIT_UNREACHABLE
    assert result.stderr == (
        f"error: cannot reach the scheduler at {closed_address} (is `suanli serve scheduling` running?; "
        "if it serves TLS, pass --ca or set SUANLI_CA)\n"
    )
    assert "Traceback" not in result.output


def test_address_from_the_environment(closed_address: str) -> None:
    result = runner.invoke(app, ["job", "get", "j-1"], env={ADDRESS_ENV: closed_address})
    assert result.exit_code == EXIT_UNREACHABLE
    assert closed_address in result.stderr


def test_invalid_spec_is_refused_before_any_call(tmp_path: Path, closed_address: str) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: t\nqueue: q\ntasks:\n  - name: w\n    resources: {gpu: {count: 1, milli: 1500}}\n")
    result = runner.invoke(app, ["job", "submit", str(spec), "--scheduler", closed_address])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == (
        f"error: invalid job spec {spec}: tasks[0].resources.gpu.milli: must be 1..1000 (got 1500)\n"
    )


def test_queue_override_makes_a_queueless_spec_valid(tmp_path: Path, closed_address: str) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: t\ntasks: [{name: w}]\n")
    without = runner.invoke(app, ["job", "submit", str(spec), "--scheduler", closed_address])
    assert without.exit_code == EXIT_USAGE
    assert without.stderr == f"error: invalid job spec {spec}: queue: required\n"
    # With --queue the spec is valid and the command gets as far as the (absent) scheduler.
    with_queue = runner.invoke(app, ["job", "submit", str(spec), "-q", "acme", "--scheduler", closed_address])
    assert with_queue.exit_code == EXIT_UNREACHABLE


def test_missing_spec_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["job", "submit", str(tmp_path / "nope.yaml")])
    assert result.exit_code == EXIT_USAGE
    assert "cannot read: No such file or directory" in result.stderr


def test_unknown_state_names_the_choices() -> None:
    result = runner.invoke(app, ["job", "list", "--state", "bogus"])
    assert result.exit_code == EXIT_USAGE
    # typer boxes and wraps usage errors, so only the start of the message is on one line.
    assert "Invalid value for --state: unknown state 'bogus'; one of pending," in result.stderr


def test_unknown_output_format() -> None:
    result = runner.invoke(app, ["job", "get", "j-1", "-o", "xml"])
    assert result.exit_code == EXIT_USAGE
