"""`suanli up --headless --duration 90` with its defaults (the demo fleet, queues and scenario), as a user
(or CI) runs it, while another terminal lists jobs through the context it made current: it must exit 0
with every submitted job final, every tenant charged and every network-aware job within its bounds;
reach each milestone of the scenario (GPU allocation above 60 %, jobs that wait, a borrow in a cohort, a
preemption, an over-quota job with its reason, an invoice: docs/demo.md, "The scenario"); and leave no
process behind: not a service, not the agent, not the broker, not the embedded PostgreSQL it started.
One run serves every test of the module."""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli.data import data_path
from suanli.infra.testing import outside_pytest_root

WORKLOAD = data_path("deploy/workloads/mixed.yaml")  # the default
SERVICES = {"scheduling", "billing", "metering", "routing", "serving", "fleet"}
# Submission stops at 90 s: the script's milestones come in its first 30 s and a one-minute billing
# period has closed (and been invoiced 15-20 s later) within 80 s; the drain takes about a minute more.
DURATION_S = 90
RUN_TIMEOUT_S = 330


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


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    base = outside_pytest_root("suanli-up-")
    home = base / "up-home"
    argv = [
        sys.executable,
        "-m",
        "suanli.cli.main",
        "up",
        "--headless",
        "--duration",
        str(DURATION_S),
        "--home",
        str(home),
    ]
    # The user's CLI config, which `suanli up` gives its context: kept out of the real ~/.config/suanli.
    env = {**os.environ, "SUANLI_CONFIG": str(base / "cli" / "config.yaml")}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    printed: list[str] = []
    reader = threading.Thread(target=_read_output, args=(process, printed), daemon=True)
    reader.start()
    # Meanwhile, a person in another terminal: plain `suanli job list`, no address, no token given;
    # and in a browser, the console at the URL `suanli up` printed, logged in with the context's token.
    probe = threading.Thread(target=_list_jobs_through_the_context, args=(process, env), daemon=True)
    browser = threading.Thread(target=_open_the_console, args=(process, printed, env), daemon=True)
    probe.start()
    browser.start()
    try:
        process.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM shuts `suanli up` down like Ctrl-C, so even a timed-out run cleans up after itself.
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)
        reader.join(timeout=30)
        pytest.fail(f"suanli up did not finish within {RUN_TIMEOUT_S}s:\n{''.join(printed)[-5000:]}")
    reader.join(timeout=30)
    probe.join(timeout=30)
    browser.join(timeout=30)
    yield subprocess.CompletedProcess(argv, process.returncode, "".join(printed)), home
    shutil.rmtree(base, ignore_errors=True)


LISTED: list[subprocess.CompletedProcess[str]] = []  # the other terminal's `suanli job list` answers
PAGES: dict[str, tuple[int, str]] = {}  # the console's pages as the browser got them: status, body


def _read_output(process: subprocess.Popen[str], into: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.append(line)


def _open_the_console(process: subprocess.Popen[str], printed: list[str], env: dict[str, str]) -> None:
    """Log in at the printed console URL with the token of the context `up` wrote, then read pages."""
    url = ""
    config = Path(env["SUANLI_CONFIG"])
    while process.poll() is None and not (url and config.exists()):
        found = re.search(r"web console: (http://\S+)", "".join(printed))
        url = found.group(1).rstrip("/") if found else ""
        time.sleep(0.5)
    if process.poll() is not None:
        return
    (context,) = [c for c in yaml.safe_load(config.read_text())["contexts"] if c["name"] == "up"]
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    form = urllib.parse.urlencode({"token": context["token"], "next": "/services"}).encode()
    with browser.open(f"{url}/login", data=form, timeout=30) as answer:  # 303 -> /services
        PAGES[answer.url.removeprefix(url)] = (answer.status, answer.read().decode())
    # The console serves as soon as it is printed, before the fleet's first reports: like a person,
    # reload the nodes page until it lists them (or the run ends).
    deadline = time.monotonic() + 120
    while True:
        with browser.open(f"{url}/nodes", timeout=30) as answer:
            PAGES["/nodes"] = (answer.status, answer.read().decode())
        if "wdc1-h200-" in PAGES["/nodes"][1] or process.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(1)


def _list_jobs_through_the_context(process: subprocess.Popen[str], env: dict[str, str]) -> None:
    """`suanli job list -o name` with only the environment a user has, until it lists jobs (or `up` ends)."""
    argv = [sys.executable, "-m", "suanli.cli.main", "job", "list", "-o", "name", "--limit", "5"]
    while process.poll() is None:
        listed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
        LISTED.append(listed)
        if listed.returncode == 0 and listed.stdout.strip():
            return
        time.sleep(2)


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_up_makes_its_context_current_in_the_users_cli_config(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, home = run
    user_config = home.parent / "cli" / "config.yaml"
    assert f"the CLI's context 'up' is now current in {user_config}" in result.stdout
    assert user_config.stat().st_mode & 0o777 == 0o600  # it holds a platform-admin token
    document = yaml.safe_load(user_config.read_text())
    assert document["current-context"] == "up"
    (context,) = [c for c in document["contexts"] if c["name"] == "up"]
    printed = re.search(r"scheduler (\S+), billing (\S+), routing (\S+), serving (\S+);", result.stdout)
    assert printed, result.stdout[-4000:]
    servers = ("scheduler", "billing", "routing", "serving")
    assert tuple(context[server] for server in servers) == printed.groups()
    assert context["token"] and Path(context["ca"]) == home / "tls" / "ca.pem"
    # Another terminal's plain `suanli job list` reached the run's scheduler through it, with its token.
    assert LISTED, "the CLI was never tried"
    last = LISTED[-1]
    assert last.returncode == 0 and last.stdout.split()[0].startswith("job/"), (last.stdout, last.stderr)
    # The same context as <home>/config.yaml, which a --no-context run leaves as the only copy.
    assert yaml.safe_load((home / "config.yaml").read_text())["contexts"] == [context]


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_up_serves_the_web_console_at_the_url_it_prints(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, _ = run
    assert re.search(r"web console: http://127\.0\.0\.1:\d+/? \(", result.stdout), result.stdout[-4000:]
    # Logged in with the context's token, the console shows the stack's own services and nodes.
    assert set(PAGES) == {"/services", "/nodes"}, PAGES.keys()
    status, services = PAGES["/services"]
    assert status == 200 and "not configured" not in services
    status, nodes = PAGES["/nodes"]
    assert status == 200 and "wdc1-h200-" in nodes, nodes[:2000]


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_up_headless_runs_the_workload_to_the_end_and_leaves_nothing(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, home = run
    tail = result.stdout[-4000:]
    assert result.returncode == 0, tail

    summary: dict[str, Any] = json.loads((home / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["healthy"] and not summary["problems"], summary
    assert summary["submitted"] >= 30, summary  # ~24 a minute and the script's 6 in 90 s
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


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_up_reaches_every_milestone_of_the_scenario_and_lists_its_evidence(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, home = run
    m: dict[str, Any] = json.loads((home / "summary.json").read_text())["milestones"]
    assert m["allocation_peak"] > 0.6, m["allocation_peak"]
    assert 0 < m["allocation_mean"] <= m["allocation_peak"]
    assert m["waited"] and all(w["code"] and w["message"] for w in m["waited"])

    # acme/vision's 64 H100s: 40 of its own, 24 borrowed from acme/nlp (deploy/scheduler/demo-queues.yaml).
    borrowed = {(b["queue"], b["flavour"]): b for b in m["borrowed"]}
    vision = borrowed[("acme/vision", "gpu:H100 SXM")]
    assert vision["cohort"] == "acme-teams" and vision["borrowed"] == 24000 and vision["guaranteed"] == 40000

    assert {(p["preemptor"].rsplit("-", 1)[0], p["victim"].rsplit("-", 1)[0]) for p in m["preemptions"]} >= {
        ("urgent-report", "research-sweep")
    }
    urgent = next(p for p in m["preemptions"] if p["preemptor"].startswith("urgent-report"))
    assert (urgent["preemptor_priority"], urgent["victim_priority"], urgent["queue"]) == (
        "high",
        "research",
        "initech",
    )

    over = next(r for r in m["refused"] if r["job"].startswith("llm-serve-405b"))
    assert over["code"] == "QUOTA_EXCEEDED" and over["queue"] == "globex"
    assert "quota of queue globex exceeded for gpu:H200: requested 56000" in over["message"]

    assert m["invoices"], m
    tenants = {t["name"] for t in yaml.safe_load(WORKLOAD.read_text())["tenants"]}
    for invoice in m["invoices"]:
        assert invoice["tenant"] in tenants and invoice["invoice_id"] and invoice["period"]
        assert Decimal(invoice["total"]) >= 0 and invoice["currency"]
    assert m["reached"] == dict.fromkeys(
        ("allocation", "wait", "borrow", "preemption", "quota_refusal", "invoice"), True
    )

    # The printed summary lists them too, and the progress lines count them as they come.
    printed = result.stdout.split("Milestones", 1)[1]
    for key in ("allocation", "wait", "borrow", "preemption", "quota_refusal", "invoice"):
        assert re.search(rf"✓ {key} ", printed), (key, printed[:2000])
    assert re.search(r"preemptions [1-9]\d*", result.stdout)
