"""A real Prometheus (Debian's ``prometheus`` package; `make prometheus` installs it) scraping a running
Stack every second, and the dashboards' queries as Grafana would send them to its HTTP API."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from suanli.infra.net import free_loopback_port
from suanli.platform.stack import Stack

# The stack's process names → the service each runs, named as the scrape jobs of deploy/prometheus.
JOBS = {"fleet": "sensing"}
SCRAPE_S = 1
# What Grafana's $__rate_interval comes to at this scrape interval (at least four scrapes).
RATE_INTERVAL = "10s"


def binary() -> str | None:
    """The prometheus executable, or None when it is not installed."""
    return shutil.which("prometheus")


def scrape_config(stack: Stack) -> dict[str, Any]:
    """One scrape job per Suanli process of the stack, named and labelled as in deploy/prometheus."""
    jobs = []
    for name, port in sorted(stack.metrics_ports.items()):
        service = JOBS.get(name, name)
        jobs.append(
            {
                "job_name": f"suanli-{service}",
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"service": service}}],
            }
        )
    return {
        "global": {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": f"{SCRAPE_S}s"},
        "scrape_configs": jobs,
    }


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (each item's ``value`` is ``[time, "text"]``)."""
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def label_values(self, label: str, match: str) -> list[str]:
        return list(self.get(f"/api/v1/label/{label}/values", **{"match[]": match}))

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False


@contextlib.contextmanager
def start(executable: str, stack: Stack, home: Path) -> Iterator[Prometheus]:
    """Run Prometheus on a free port scraping ``stack`` for the ``with`` block."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(stack)), encoding="utf-8")
    port = free_loopback_port()
    log = (home / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            executable,
            f"--config.file={config}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield Prometheus(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def grafana_expr(expr: str) -> str:
    """A panel's query as Grafana sends it with every template variable on All."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr)
