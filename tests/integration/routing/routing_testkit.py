"""Routing test kit: `suanli serve routing` as a subprocess of the tests, configured by its environment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from suanli.infra.net import free_loopback_port

# The lines of the process's log worth showing when a module's tests end.
LOG_MARKS = ("Worker]: Ready", "routing", "WARNING", "ERROR", "Traceback")


class RoutingProcess:
    """`suanli serve routing` in its own process: role ``all`` runs the view processor and the API (on
    ``address``), ``view`` the processor alone. ``settings`` are routing's (SUANLI_ROUTING_<NAME>)."""

    def __init__(
        self, bootstrap: str, prefix: str, log_path: Path, *, role: str = "all", **settings: float
    ) -> None:
        self.port = free_loopback_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "SUANLI_KAFKA_BOOTSTRAP": bootstrap,
            "SUANLI_TOPIC_PREFIX": prefix,
            "SUANLI_ROUTING_ROLE": role,
            "SUANLI_ROUTING_LISTEN": self.address,
            **{f"SUANLI_ROUTING_{name.upper()}": str(value) for name, value in settings.items()},
            "SUANLI_METRICS_PORT": "0",
            "OTEL_SDK_DISABLED": "true",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "suanli.cli.main", "serve", "routing", "--loglevel", "info"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code

    @contextlib.contextmanager
    def running(self) -> Iterator[RoutingProcess]:
        """Started; on leaving, stopped, the lines of its log that say how it ran printed (the last
        12,000 characters of them), and its exit on SIGTERM checked."""
        self.start()
        try:
            yield self
        finally:
            code = self.stop()
            lines = self.log_path.read_text(errors="replace").splitlines()
            print("\n".join(line for line in lines if any(m in line for m in LOG_MARKS))[-12_000:])
        assert code == 0, f"suanli serve routing exited {code} on SIGTERM"
