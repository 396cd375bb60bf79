"""Starting the platform's processes, waiting until each is ready, and stopping them all with nothing left.

Each child runs in its own process group so that stopping it also stops what it started (an agent's task
subprocesses, a faust worker's threads): SIGTERM to the group, a grace period, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ReadyCheck = Callable[[], bool]


class ServiceStartError(RuntimeError):
    """A child exited or did not become ready in time."""


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    argv: Sequence[str]
    ready: ReadyCheck | None = None
    ready_timeout_s: float = 60.0
    env: Mapping[str, str] = field(default_factory=dict)


def suanli_argv(*args: str) -> list[str]:
    """Run the CLI with this interpreter, so children use the same virtualenv without relying on PATH."""
    return [sys.executable, "-m", "suanli.cli.main", *args]


@dataclass
class RunningService:
    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> int | None:
        return self.process.poll()


class Supervisor:
    """Owns the children; `stop_all()` (also on exit via context manager) leaves no process behind."""

    def __init__(self, log_dir: Path, base_env: Mapping[str, str] | None = None) -> None:
        self.log_dir = log_dir
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.services: list[RunningService] = []

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(self, spec: ServiceSpec, wait: bool = True) -> RunningService:
        """Start ``spec``'s process and, unless ``wait`` is off, wait until it is ready (`wait_ready`
        later: other processes start meanwhile)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        env = {**self.base_env, **spec.env}
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                list(spec.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        running = RunningService(spec, process, log_path)
        self.services.append(running)
        if wait:
            self.wait_ready(running)
        return running

    def wait_ready(self, running: RunningService) -> None:
        """Until its ready check passes; `ServiceStartError` when it exits or is not ready in time."""
        spec = running.spec
        deadline = time.monotonic() + spec.ready_timeout_s
        while time.monotonic() < deadline:
            code = running.exited()
            if code is not None:
                raise ServiceStartError(f"{spec.name} exited with code {code}; log: {running.log_path}")
            if spec.ready is None or spec.ready():
                return
            time.sleep(0.1)
        raise ServiceStartError(
            f"{spec.name} was not ready within {spec.ready_timeout_s:.0f}s; log: {running.log_path}"
        )

    def failed(self) -> list[tuple[str, int]]:
        """Children that have exited on their own (name, exit code)."""
        return [(s.spec.name, code) for s in self.services if (code := s.exited()) is not None]

    def stop(self, running: RunningService, grace_s: float = 10.0) -> None:
        stop_group(running.process, grace_s)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child, then give them one shared grace period before SIGKILL.

        Signalled in reverse order, so producers of work (agents, workload) are told first. The grace is
        shared rather than per child: a service that cannot finish its shutdown (a consumer still
        committing to a broker that was restarted) costs one grace period, not one per service after it.
        """
        stop_groups([running.process for running in reversed(self.services)], grace_s)
        self.services.clear()


def stop_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    stop_groups([process], grace_s)


def stop_groups(processes: Sequence[subprocess.Popen[bytes]], grace_s: float) -> None:
    groups: list[tuple[subprocess.Popen[bytes], int]] = []
    for process in processes:
        try:
            groups.append((process, os.getpgid(process.pid)))
        except ProcessLookupError:
            process.poll()
    for _, pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process, pgid in groups:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            process.wait(timeout=5)
        # The leader may exit before its children: sweep the group once more.
        _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[int]:
    """Live processes in a process group (from /proc): used to prove nothing was left behind."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, process_group = fields[0], int(fields[2])
        if process_group == pgid and state != "Z":
            members.append(int(entry.name))
    return members
