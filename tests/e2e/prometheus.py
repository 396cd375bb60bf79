"""A real Prometheus (Debian's ``prometheus`` package; `make prometheus` installs it) scraping a running
Stack every second, and the dashboards of ``deploy/grafana/dashboards``: their panels' queries and
template variables as Grafana would send them to its HTTP API."""

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


DASHBOARDS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"
# Grafana's value of a multi-value variable set to "All" (each dashboard variable's allValue).
ALL = ".*"
_REFERENCE = re.compile(r"\$\{?(\w+)\}?")
_LABEL_VALUES = re.compile(r"label_values\((?P<match>.+), (?P<label>\w+)\)")
# What Grafana escapes in a variable's value before putting it in a regex matcher.
_REGEX_SPECIAL = set("\\^$*+?.()|[]{}")


@dataclass(frozen=True)
class Variable:
    name: str
    match: str  # the series selector of its label_values(), maybe naming earlier variables
    label: str


@dataclass(frozen=True)
class Dashboard:
    name: str  # the file's stem
    queries: tuple[tuple[str, str], ...]  # (panel title, expr) of every panel target
    variables: tuple[Variable, ...]  # in Grafana's order of resolution


def dashboards() -> list[Dashboard]:
    """Every dashboard of deploy/grafana/dashboards, panels of collapsed rows included."""
    found = []
    for path in sorted(DASHBOARDS_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        panels = [p for top in data["panels"] for p in (top, *top.get("panels", []))]
        queries = tuple((p["title"], t["expr"]) for p in panels for t in p.get("targets", []))
        variables = []
        for variable in data["templating"]["list"]:
            parsed = _LABEL_VALUES.fullmatch(variable["query"]["query"])
            assert parsed, f"{path.name}: ${variable['name']} is not a label_values() query"
            variables.append(Variable(variable["name"], parsed["match"], parsed["label"]))
        found.append(Dashboard(path.stem, queries, tuple(variables)))
    return found


def regex_of(values: list[str]) -> str:
    """A multi-value variable set to these values, as Grafana formats it for a regex matcher: each value
    escaped (a backslash doubled for the PromQL string), in an alternation."""
    escaped = ("".join(f"\\\\{c}" if c in _REGEX_SPECIAL else c for c in value) for value in values)
    return f"({'|'.join(escaped)})"


def grafana_expr(expr: str, variables: dict[str, str]) -> str:
    """A query as Grafana sends it: ``$__rate_interval`` at this scrape interval and every dashboard
    variable replaced by its value (``ALL`` or a ``regex_of``); a variable not given is an error."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    return _REFERENCE.sub(lambda m: variables[m.group(1)], expr)


def references(expr: str) -> set[str]:
    """The dashboard variables ``expr`` names."""
    return set(_REFERENCE.findall(expr.replace("$__rate_interval", "")))
