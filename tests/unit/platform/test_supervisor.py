"""The supervisor starts real processes, notices readiness and failures, and leaves nothing behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from suanli.platform.supervisor import ServiceSpec, ServiceStartError, Supervisor, group_members

# A child that starts a grandchild and ignores SIGTERM: the hardest case for "no process left behind".
STUBBORN = """
import signal, subprocess, sys, time, pathlib
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(600)
"""


def test_ready_check_and_stop_all_leave_no_process(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    with Supervisor(tmp_path / "logs") as supervisor:
        running = supervisor.start(
            ServiceSpec("stubborn", [sys.executable, "-c", STUBBORN, str(marker)], ready=marker.exists)
        )
        pgid = os.getpgid(running.pid)
        assert marker.read_text() == "ready"
        assert len(group_members(pgid)) == 2  # the child and its grandchild
        supervisor.stop_all(grace_s=0.5)
    # SIGKILL is delivered at once but a busy machine may take a moment to tear the processes down.
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(pgid) == []


def test_stubborn_children_share_one_grace_period(tmp_path: Path) -> None:
    # Three children that ignore SIGTERM: one after the other they would cost three grace periods.
    grace_s = 1.5
    with Supervisor(tmp_path / "logs") as supervisor:
        for i in range(3):
            marker = tmp_path / f"ready-{i}"
            argv = [sys.executable, "-c", STUBBORN, str(marker)]
            supervisor.start(ServiceSpec(f"stubborn-{i}", argv, ready=marker.exists))
        groups = [os.getpgid(s.pid) for s in supervisor.services]
        began = time.monotonic()
        supervisor.stop_all(grace_s=grace_s)
        took = time.monotonic() - began
    assert took < 2 * grace_s, took
    deadline = time.monotonic() + 10
    while any(group_members(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [group_members(g) for g in groups] == [[], [], []]


# A child ready only once the test has written the `go` file: readiness the test controls.
GATED = """
import pathlib, sys, time
go, ready = map(pathlib.Path, sys.argv[1:])
while not go.exists():
    time.sleep(0.01)
ready.write_text("up")
time.sleep(600)
"""


def test_a_child_started_without_waiting_is_waited_for_later(tmp_path: Path) -> None:
    go, marker = tmp_path / "go", tmp_path / "ready"
    with Supervisor(tmp_path / "logs") as supervisor:
        argv = [sys.executable, "-c", GATED, str(go), str(marker)]
        running = supervisor.start(ServiceSpec("gated", argv, ready=marker.exists), wait=False)
        assert running.exited() is None and not marker.exists()  # start returned before it was ready
        go.write_text("go")
        supervisor.wait_ready(running)
        assert marker.read_text() == "up"


def test_a_child_that_exits_before_ready_is_reported_with_its_log(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs")
    spec = ServiceSpec(
        "broken", [sys.executable, "-c", "print('bad config'); raise SystemExit(3)"], ready=lambda: False
    )
    with pytest.raises(ServiceStartError, match=r"broken exited with code 3; log: .*broken\.log"):
        supervisor.start(spec)
    assert "bad config" in (tmp_path / "logs" / "broken.log").read_text()
    supervisor.stop_all()


def test_failed_lists_children_that_died_on_their_own(tmp_path: Path) -> None:
    with Supervisor(tmp_path / "logs") as supervisor:
        supervisor.start(ServiceSpec("quick", [sys.executable, "-c", "raise SystemExit(7)"]))
        supervisor.services[0].process.wait(timeout=10)
        assert supervisor.failed() == [("quick", 7)]
