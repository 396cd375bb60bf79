"""`suanli serve SERVICE` as a subprocess of the tests (a faust worker takes seconds to join its group, so
one process serves a whole module), configured by its environment, its output in a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


class ServeProcess:
    """`suanli serve SERVICE` on ``bootstrap`` under topic prefix ``prefix``, with ``env`` over this
    process's environment (no metrics port, no telemetry export); stopped by SIGTERM and restartable."""

    def __init__(
        self,
        service: str,
        bootstrap: str,
        prefix: str,
        log_path: Path,
        env: Mapping[str, str],
        *,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.service = service
        self.log_path = log_path
        self.stop_timeout_s = stop_timeout_s
        self.env = {
            **os.environ,
            "SUANLI_KAFKA_BOOTSTRAP": bootstrap,
            "SUANLI_TOPIC_PREFIX": prefix,
            **env,
            "SUANLI_METRICS_PORT": "0",
            "OTEL_SDK_DISABLED": "true",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "suanli.cli.main", "serve", self.service, "--loglevel", "info"],
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
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; the exit code (None: it was not running)."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code
