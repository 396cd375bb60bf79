"""The real agent confines what it runs: clean environment (real subprocesses), rlimits, run-as user,
cgroup v2 files, and ids from placements validated before they become file names."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import resource
import sys
from pathlib import Path
from typing import Any

import pytest

from suanli.sensing.adapters.confinement import (
    DEFAULT_TASK_PATH,
    CgroupV2,
    Confinement,
    ConfinementError,
    detect_cgroup,
)
from suanli.sensing.adapters.processes import ProcessLauncher
from suanli.sensing.domain.placement import InvalidOrder, Placement, parse_placement
from suanli.sensing.service_layer.ports import LaunchError

SECRET_DSN = "postgres://suanli:s3cret-pw@db:5432/suanli"


def _record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "task_id": "job-1-w-0",
        "job_id": "job-1",
        "node_id": "n1",
        "attempt": 1,
        "tenant": "acme",
        "devices": [],
        "requests": {"cpu_milli": 1000, "memory_mib": 128},
        "command": [sys.executable, "-c", "pass"],
        "env": {"X": "y"},
    }
    return record | overrides


async def _run(launcher: ProcessLauncher, placement: Placement, log_dir: Path) -> tuple[int, str]:
    task = await launcher.launch(placement)
    code = await asyncio.wait_for(task.wait(), 30)
    return code, (log_dir / f"{placement.task_id}.{placement.attempt}.log").read_text()


DUMP = "import json, os, resource, sys; print(json.dumps({'env': dict(os.environ), %s}))"


async def test_a_task_never_sees_the_agents_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUANLI_PG_DSN", SECRET_DSN)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/cuda/lib64")
    launcher = ProcessLauncher(
        "n1", log_dir=tmp_path, confinement=Confinement(passthrough=("LD_LIBRARY_PATH",))
    )
    placement = parse_placement(_record(command=[sys.executable, "-c", DUMP % "'uid': os.getuid()"]))
    code, out = await _run(launcher, placement, tmp_path)
    assert code == 0, out
    env = json.loads(out)["env"]
    assert "SUANLI_PG_DSN" not in env and not any("s3cret" in v for v in env.values())
    assert env["X"] == "y"  # the spec's env
    assert env["LD_LIBRARY_PATH"] == "/opt/cuda/lib64"  # passed through by name, by the operator
    assert env["PATH"] == DEFAULT_TASK_PATH and env["HOME"] == pwd.getpwuid(os.geteuid()).pw_dir
    assert (env["SUANLI_TASK_ID"], env["SUANLI_JOB_ID"], env["SUANLI_NODE_ID"]) == (
        "job-1-w-0",
        "job-1",
        "n1",
    )
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["SUANLI_MEMORY_MIB"] == "128"
    # Only the platform's base variables, the pass-through, the spec's and the task's own.
    assert {k for k in env if not k.startswith(("SUANLI_", "CUDA_", "LC_"))} <= {
        "PATH",
        "HOME",
        "LANG",
        "LD_LIBRARY_PATH",
        "X",
    }


async def test_memory_and_cpu_time_are_capped_by_rlimits(tmp_path: Path) -> None:
    launcher = ProcessLauncher(
        "n1",
        log_dir=tmp_path,
        confinement=Confinement(address_space_factor=2.0, cpu_seconds=7),
    )
    script = (
        "import resource, sys\n"
        "print(resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CPU))\n"
        "try:\n    bytearray(1 << 30)\nexcept MemoryError:\n    sys.exit(42)\n"
    )
    placement = parse_placement(_record(command=[sys.executable, "-c", script]))
    code, out = await _run(launcher, placement, tmp_path)
    limit = 2 * 128 * 1024 * 1024
    assert out.split("\n")[0] == f"({limit}, {limit}) (7, 8)"
    assert code == 42  # the 1 GiB allocation was refused by RLIMIT_AS
    # The agent itself is untouched.
    assert resource.getrlimit(resource.RLIMIT_CPU)[0] != 7


async def test_the_task_keeps_its_pid_and_a_missing_command_is_a_launch_error(tmp_path: Path) -> None:
    # The limits are taken on by a small process that then becomes the task: the pid the agent reports
    # (and signals) is the task's own.
    launcher = ProcessLauncher("n1", log_dir=tmp_path, confinement=Confinement(cpu_seconds=60))
    script = "import os, sys; print(os.getpid(), os.path.basename(sys.argv[0]))"
    placement = parse_placement(_record(command=[sys.executable, "-c", script]))
    task = await launcher.launch(placement)
    assert await asyncio.wait_for(task.wait(), 30) == 0
    assert (tmp_path / "job-1-w-0.1.log").read_text().split() == [str(task.pid), "-c"]
    missing = parse_placement(_record(task_id="t2", command=["no-such-program-x", "--flag"]))
    with pytest.raises(LaunchError, match="'no-such-program-x': not found"):
        await launcher.launch(missing)


async def test_limits_off_sets_no_rlimit(tmp_path: Path) -> None:
    launcher = ProcessLauncher("n1", log_dir=tmp_path, confinement=Confinement(limits=False))
    script = "import resource; print(resource.getrlimit(resource.RLIMIT_AS))"
    placement = parse_placement(_record(command=[sys.executable, "-c", script]))
    code, out = await _run(launcher, placement, tmp_path)
    assert code == 0 and out.strip() == str(resource.getrlimit(resource.RLIMIT_AS))


async def test_a_tenant_runs_as_its_user_only_when_the_agent_is_root(tmp_path: Path) -> None:
    conf = Confinement(run_as={"acme": "nobody"})
    if os.geteuid() != 0:
        with pytest.raises(ConfinementError, match="root"):
            ProcessLauncher("n1", log_dir=tmp_path, confinement=conf)
        return
    nobody = pwd.getpwnam("nobody")
    launcher = ProcessLauncher("n1", log_dir=tmp_path, confinement=conf)
    # /bin/sh: the test's interpreter may live where "nobody" cannot read (root's home).
    script = ["/bin/sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $HOME"']
    code, out = await _run(launcher, parse_placement(_record(command=script)), tmp_path)
    assert code == 0, out
    # No supplementary groups of the agent's: only the user's own group.
    assert out.split() == [str(nobody.pw_uid), str(nobody.pw_gid), str(nobody.pw_gid), nobody.pw_dir]
    # Another tenant's task keeps the agent's user; an unknown user fails the launch with the reason.
    other = parse_placement(_record(task_id="t2", tenant="beta", command=script))
    code, out = await _run(launcher, other, tmp_path)
    assert out.split()[0] == str(os.getuid())
    missing = ProcessLauncher(
        "n1", log_dir=tmp_path, confinement=Confinement(run_as={"acme": "no-such-user-x"})
    )
    with pytest.raises(LaunchError, match="no-such-user-x"):
        await missing.launch(parse_placement(_record(task_id="t3")))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"task_id": "../../etc/x"}, "task_id '../../etc/x': must be 1..253 letters"),
        ({"task_id": ".hidden"}, "task_id '.hidden'"),
        ({"task_id": "a" * 254}, "task_id 'aaaa"),
        ({"job_id": "job/../1"}, "job_id 'job/../1'"),
        ({"node_id": "n1\n"}, "node_id 'n1\\n'"),
        ({"env": {"A=B": "x"}}, "bad environment variable 'A=B'"),
        ({"env": {"A": "x\x00y"}}, "bad environment variable 'A'"),
    ],
)
def test_unsafe_ids_and_env_are_refused(override: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOrder) as info:
        parse_placement(_record(**override))
    assert message in str(info.value)


async def test_a_log_path_outside_the_directory_is_never_opened(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    launcher = ProcessLauncher("n1", log_dir=logs)
    forged = Placement("../escape", "job-1", "n1", 1, command=(sys.executable, "-c", "pass"))
    with pytest.raises(LaunchError, match="outside"):
        await launcher.launch(forged)
    assert not (tmp_path / "escape.1.log").exists()


def test_cgroup_v2_files_for_a_task(tmp_path: Path) -> None:
    # A directory laid out like a delegated cgroup v2 subtree: the kernel's files are plain files here.
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    cgroup = CgroupV2.open(tmp_path)
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +cpu"
    group = cgroup.create("job-1-w-0.1", memory_mib=256, cpu_milli=1500)
    assert (group / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (group / "cpu.max").read_text() == "150000 100000"
    unlimited = cgroup.create("t.2", memory_mib=0, cpu_milli=0)
    assert (unlimited / "memory.max").read_text() == "max" and (
        unlimited / "cpu.max"
    ).read_text() == "max 100000"


def test_cgroup_detection_says_why_not(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("io pids\n")
    reason = detect_cgroup(Confinement(cgroup_parent=tmp_path))
    assert isinstance(reason, str) and "['memory', 'cpu'] not available" in reason
    no_mount = tmp_path / "mountinfo"
    no_mount.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    assert detect_cgroup(Confinement(), mountinfo=no_mount) == "no cgroup v2 mount"
    assert detect_cgroup(Confinement(limits=False)) == "limits are off"
