"""The alerting rules (deploy/prometheus/rules): written against served metric names, each with a runbook
entry and a promtool unit test, and valid for promtool (`make test-alerts` installs it when missing)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli.data import data_path
from suanli.telemetry.names import METRICS

REPO_ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = data_path("deploy") / "prometheus"
RULE_FILES = sorted((PROMETHEUS / "rules").glob("*.yml"))
TEST_FILES = sorted((PROMETHEUS / "rules" / "tests").glob("*.yml"))
OPERATIONS = REPO_ROOT / "docs" / "operations.md"
SEVERITIES = {"critical", "warning"}

SERVED = {m.name for m in METRICS} | {
    m.name + suffix for m in METRICS if m.kind == "histogram" for suffix in ("_bucket", "_count", "_sum")
}


def _alerts() -> list[dict[str, Any]]:
    return [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


ALERTS = _alerts()


def test_there_are_rules_and_their_tests() -> None:
    assert RULE_FILES and TEST_FILES
    assert len({a["alert"] for a in ALERTS}) == len(ALERTS)


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a["alert"])
def test_alert_queries_only_served_metrics(alert: dict[str, Any]) -> None:
    names = set(re.findall(r"\bsuanli_[a-z0-9_]+", alert["expr"]))
    # Besides Suanli's own metrics, only the scrape health of the suanli-* jobs.
    assert names or re.search(r'\bup\{job=~?"suanli-', alert["expr"]), "an alert on no Suanli metric"
    assert names <= SERVED, names - SERVED


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a["alert"])
def test_alert_has_severity_text_and_a_runbook_entry(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert annotations["summary"] and annotations["description"]
    assert annotations["runbook"] == f"docs/operations.md#{name.lower()}"
    doc = OPERATIONS.read_text(encoding="utf-8")
    entry = re.search(rf"^#### {name}\n(.+?)(?=^#)", doc, re.MULTILINE | re.DOTALL)
    assert entry, f"no '#### {name}' runbook entry in docs/operations.md"
    assert "What it means" in entry.group(1) and "What to do" in entry.group(1)


def test_every_alert_has_a_promtool_unit_test() -> None:
    tested = {
        case["alertname"]
        for path in TEST_FILES
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {a["alert"] for a in ALERTS} <= tested


def _promtool(*args: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: `make test-alerts` installs Debian's prometheus package")
    done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_accepts_the_config_and_its_rules() -> None:
    _promtool("check", "config", str(PROMETHEUS / "prometheus.yml"))


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    _promtool("test", "rules", *map(str, TEST_FILES))
