"""Routing test kit: `suanli serve routing` as a subprocess of the tests, configured by its environment."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from servekit import ServeProcess

from suanli.infra.net import free_loopback_port

# The lines of the process's log worth showing when its tests end.
LOG_MARKS = ("Worker]: Ready", "routing", "WARNING", "ERROR", "Traceback")


class RoutingProcess(ServeProcess):
    """`suanli serve routing`: role ``all`` runs the view processor and the API (on ``address``), ``view``
    the processor alone. ``settings`` are routing's (SUANLI_ROUTING_<NAME>)."""

    def __init__(
        self, bootstrap: str, prefix: str, log_path: Path, *, role: str = "all", **settings: float
    ) -> None:
        self.port = free_loopback_port()
        self.address = f"127.0.0.1:{self.port}"
        env = {
            "SUANLI_ROUTING_ROLE": role,
            "SUANLI_ROUTING_LISTEN": self.address,
            **{f"SUANLI_ROUTING_{name.upper()}": str(value) for name, value in settings.items()},
        }
        super().__init__("routing", bootstrap, prefix, log_path, env)

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
