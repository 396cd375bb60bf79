"""`suanli up --headless --duration 60` on the small fleet, as a user (or CI) runs it: it must exit 0
with every submitted job final, every tenant charged and every network-aware job within its bounds, and
leave no process behind: not a service,
not the agent, not the broker, not the embedded PostgreSQL it started."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli.data import data_path

FLEET = data_path("deploy/fleets/small.yaml")
WORKLOAD = data_path("deploy/workloads/mixed.yaml")
SERVICES = {"scheduling", "billing", "metering", "routing", "fleet"}
RUN_TIMEOUT_S = 270


@dataclass(frozen=True)
class Proc:
    pid: int
    pgid: int
    start: int
    text: str  # command line and environment, NUL-separated


def _processes() -> Iterator[Proc]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            if fields[0] == "Z":
                continue
            text = (entry / "cmdline").read_bytes() + b"\0"
            # Another user's process hides its environment: its command line is enough then.
            with contextlib.suppress(OSError):
                text += (entry / "environ").read_bytes()
        except (OSError, IndexError):
            continue
        yield Proc(int(entry.name), int(fields[2]), int(fields[19]), text.decode(errors="replace"))


@pytest.fixture
def run(service_home: Path) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    home = service_home / "up-home"
    argv = [
        sys.executable,
        "-m",
        "suanli.cli.main",
        "up",
        "--headless",
        "--duration",
        "60",
        "--fleet",
        str(FLEET),
        "--home",
        str(home),
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM shuts `suanli up` down like Ctrl-C, so even a timed-out run cleans up after itself.
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=90)
        pytest.fail(f"suanli up did not finish within {RUN_TIMEOUT_S}s:\n{out[-5000:]}")
    yield subprocess.CompletedProcess(argv, process.returncode, out), home


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_up_headless_runs_the_workload_to_the_end_and_leaves_nothing(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, home = run
    tail = result.stdout[-4000:]
    assert result.returncode == 0, tail

    summary: dict[str, Any] = json.loads((home / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["healthy"] and not summary["problems"], summary
    assert summary["submitted"] >= 20, summary  # ~36 a minute for 60 s
    assert summary["all_final"] and summary["unfinished"] == 0 and summary["rejected"] == 0
    assert summary["succeeded"] + summary["failed"] + summary["cancelled"] == summary["submitted"]
    assert summary["placements"] >= summary["submitted"]
    assert 0 < summary["gpu_utilisation_avg"] <= summary["gpu_utilisation_peak"] <= 1
    assert 0 <= summary["fragmentation_avg"] < 1

    tenants = {t["name"] for t in yaml.safe_load(WORKLOAD.read_text())["tenants"]}
    assert set(summary["charges"]) == tenants
    for tenant in tenants:
        assert Decimal(summary["charges"][tenant]) > 0, (tenant, summary["charges"])
        assert summary["charge_counts"][tenant] > 0

    # The workload's network-aware jobs (deploy/workloads/mixed.yaml): each ran within its RTT bound of
    # its data region, the gangs in one region, Tokyo's chat in Tokyo (everywhere else is > 20 ms away).
    network = summary["network_placements"]
    assert {p["job"].rsplit("-", 1)[0] for p in network} == {
        "finetune-near-data",
        "chat-tokyo",
        "report-near-data",
    }
    for placed in network:
        assert placed["state"] == "succeeded" and len(placed["regions"]) == 1, placed
        if placed["max_rtt_ms"] is not None:
            assert placed["rtt_ms"] is not None and placed["rtt_ms"] <= placed["max_rtt_ms"], placed
    assert {p["regions"][0] for p in network if p["job"].startswith("chat-tokyo")} == {"tokyo"}
    assert "Network-aware placements" in result.stdout
    # The progress line carries routing's GetNetwork answer: the region pairs per status.
    assert re.search(r"region links [1-9]\d* ok", result.stdout), tail

    recorded = json.loads((home / "pids.json").read_text())["processes"]
    names = {p["name"] for p in recorded}
    assert {"up", "tansu", "postgres"} | SERVICES <= names, names
    by_pid = {p["pid"]: p for p in recorded}
    groups = {p["pgid"] for p in recorded if p["name"] != "up"} - {os.getpgid(0)}
    left = [
        proc
        for proc in _processes()
        if proc.pid != os.getpid()
        and (
            (proc.pid in by_pid and by_pid[proc.pid]["start"] == proc.start)  # a recorded process
            or proc.pgid in groups  # something one of them started
            or str(home) in proc.text  # anything else run for this home (the DSN names its socket)
        )
    ]
    assert not left, [(p.pid, p.text.split("\0", 1)[0]) for p in left]
    assert not (home / "pg" / "postmaster.pid").exists(), "the embedded PostgreSQL did not shut down"
