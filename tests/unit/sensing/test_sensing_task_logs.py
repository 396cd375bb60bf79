"""The agent's task logs: whose an attempt is, reading and following its output, the advertised address."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from suanli.errors import InvalidArgument
from suanli.sensing.adapters.task_logs import LogOwner, TaskLogNotFound, TaskLogs, write_owner
from suanli.sensing.domain.placement import Placement
from suanli.sensing.entrypoints.logs_server import advertised


def _placement(task_id: str = "j1-w", attempt: int = 2) -> Placement:
    return Placement(task_id, "j1", "n1", attempt, tenant="acme")


def test_the_owner_is_read_back_and_a_missing_or_bad_attempt_is_refused(tmp_path: Path) -> None:
    write_owner(tmp_path, _placement())
    (tmp_path / "j1-w.2.log").write_bytes(b"")
    logs = TaskLogs(tmp_path, "n1")
    assert logs.owner("j1-w", 2) == LogOwner("acme", "j1")
    with pytest.raises(TaskLogNotFound, match="node n1 keeps no log of task j1-w attempt 1"):
        logs.owner("j1-w", 1)
    with pytest.raises(InvalidArgument, match=re.escape("task_id '../x'")):
        logs.owner("../x", 1)
    with pytest.raises(InvalidArgument, match="attempts count from 1"):
        logs.owner("j1-w", 0)


async def test_a_followed_log_streams_until_its_attempt_is_no_longer_active(tmp_path: Path) -> None:
    path = tmp_path / "j1-w.2.log"
    path.write_bytes(b"one\n")
    reads = 0

    def active(task_id: str, attempt: int) -> bool:
        # The attempt runs for two polls, writing a line on each; then it has ended.
        nonlocal reads
        reads += 1
        if reads <= 2:
            with path.open("ab") as log:
                log.write(f"poll {reads}\n".encode())
        return reads <= 2

    logs = TaskLogs(tmp_path, "n1", active)
    chunks = [c async for c in logs.read("j1-w", 2, follow=True, poll_s=0.0)]
    assert b"".join(chunks) == b"one\npoll 1\npoll 2\n"
    # Without follow: what is there, at once.
    assert [c async for c in logs.read("j1-w", 2, follow=False)] == [b"one\npoll 1\npoll 2\n"]


def test_a_wildcard_listen_host_is_advertised_as_the_host_name() -> None:
    assert advertised("0.0.0.0:0", 50061) == f"{socket.gethostname()}:50061"
    assert advertised("127.0.0.1:0", 41234) == "127.0.0.1:41234"
    assert advertised("[::1]:0", 7) == "[::1]:7"
