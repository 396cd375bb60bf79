"""`suanli job list --watch` against the real scheduler, run as a person runs it (a process, stopped
with Ctrl-C): the listing, then a line for the job that appears and for each change of its state."""

from __future__ import annotations

import asyncio
import csv
import os
import signal
import sys
from pathlib import Path

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .clikit import Scheduler, write_spec

WATCHED = """
name: watched
queue: acme/ops
max_retries: 0
labels: {suite: watched}
tasks:
  - name: w
    resources: {cpu: "1", memory: 1Gi}
    command: python etl.py
    duration: 1h
"""


async def _line(stream: asyncio.StreamReader, deadline: float) -> list[str]:
    raw = await asyncio.wait_for(stream.readline(), max(0.1, deadline - asyncio.get_running_loop().time()))
    assert raw, "the watcher ended"
    return next(csv.reader([raw.decode()]))


async def test_list_watch_prints_the_new_job_and_each_change(scheduler: Scheduler, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "suanli.cli.main", "job", "list", "-l", "suite=watched", "--watch"]
    argv += ["--interval", "0.3", "-o", "csv", "--no-headers", "--scheduler", scheduler.address]
    env = {**os.environ, "SUANLI_CONFIG": str(tmp_path / "none.yaml"), "COLUMNS": "240"}
    watcher = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    assert watcher.stdout is not None
    try:
        deadline = asyncio.get_running_loop().time() + 60
        job_id = await scheduler.submit(write_spec(tmp_path, "watched", WATCHED))
        first = await _line(watcher.stdout, deadline)
        assert first[0] == job_id and first[1] == "watched", first
        await scheduler.api.CancelJob(pb.CancelJobRequest(job_id=job_id, reason="watched"))
        states = [first[4]]
        while states[-1] != "Cancelled":
            row = await _line(watcher.stdout, deadline)
            assert row[0] == job_id, row  # only the job that changed
            states.append(row[4])
        assert len(states) == len(set(states)), states  # a line per change, never a repeat
    finally:
        watcher.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(watcher.wait(), 30)
    assert code == 0, (await watcher.stderr.read()).decode() if watcher.stderr else code
