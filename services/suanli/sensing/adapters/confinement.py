"""How a real task process is confined: a clean environment, resource limits, an optional user.

- Environment: a task sees only the platform's base variables (``PATH``, ``HOME``, ``LANG``), the
  variables the operator passes through by name, the job spec's env and the task variables of
  `task_environment`; never the agent's own environment (which holds the broker and database secrets).
- Limits: with a writable cgroup v2 directory (the `cgroup_parent` setting, or the root of a cgroup v2
  mount when the agent runs in the root cgroup), each task gets a cgroup with ``memory.max`` (its memory
  request) and ``cpu.max`` (its CPU request as a quota). Without one, memory falls back to
  ``RLIMIT_AS`` (virtual memory: the request times `address_space_factor`, since virtual size runs ahead
  of what is resident); CPU rate has no rlimit equivalent (``RLIMIT_CPU`` caps CPU *seconds*, so it is
  offered only as an optional per-task CPU-time cap, `cpu_seconds`).
- User: `run_as` maps a tenant to a local user the task runs as (only when the agent runs as root).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MIB = 1024 * 1024
DEFAULT_TASK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CPU_PERIOD_US = 100_000
CGROUP_CONTROLLERS = ("memory", "cpu")


@dataclass(frozen=True, slots=True)
class Confinement:
    """The operator's choices (defaults: `suanli.sensing.entrypoints.settings`)."""

    path: str = DEFAULT_TASK_PATH
    passthrough: tuple[str, ...] = ()  # agent variables handed to tasks by name (e.g. LD_LIBRARY_PATH)
    limits: bool = True
    address_space_factor: float = 4.0  # RLIMIT_AS = memory request x this (0: no RLIMIT_AS)
    cpu_seconds: int = 0  # RLIMIT_CPU per task (0: none)
    cgroup_parent: Path | None = None  # None: detect
    run_as: Mapping[str, str] = field(default_factory=dict)  # tenant -> user name


class ConfinementError(ValueError):
    """The confinement asked for cannot be had on this machine (say run-as without root)."""


@dataclass(frozen=True, slots=True)
class TaskUser:
    uid: int
    gid: int
    home: str


def base_environment(conf: Confinement, agent_env: Mapping[str, str], home: str) -> dict[str, str]:
    """What every task starts from: the platform's base variables and the operator's pass-throughs."""
    env = {"PATH": conf.path, "HOME": home, "LANG": "C.UTF-8"}
    env.update({name: agent_env[name] for name in conf.passthrough if name in agent_env})
    return env


def resolve_user(conf: Confinement, tenant: str) -> TaskUser | None:
    """The user a tenant's tasks run as; None: the agent's own user."""
    name = conf.run_as.get(tenant)
    if name is None:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ConfinementError(f"run-as user {name!r} of tenant {tenant!r} does not exist") from None
    return TaskUser(entry.pw_uid, entry.pw_gid, entry.pw_dir)


def own_home() -> str:
    """The agent user's home from the user database (not from the agent's environment)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return "/"


class CgroupV2:
    """Task cgroups under one writable cgroup v2 directory whose subtree has the memory and cpu
    controllers."""

    def __init__(self, parent: Path) -> None:
        self.parent = parent

    @classmethod
    def open(cls, parent: Path) -> CgroupV2:
        """Enable the controllers for ``parent``'s children; raises `ConfinementError` when it cannot."""
        try:
            available = (parent / "cgroup.controllers").read_text().split()
        except OSError as exc:
            raise ConfinementError(f"{parent} is not a cgroup v2 directory: {exc}") from None
        missing = [c for c in CGROUP_CONTROLLERS if c not in available]
        if missing:
            raise ConfinementError(f"{parent}: controllers {missing} not available (has {available})")
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            wanted = [c for c in CGROUP_CONTROLLERS if c not in enabled]
            if wanted:
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        except OSError as exc:
            raise ConfinementError(f"{parent}: cannot enable {list(CGROUP_CONTROLLERS)}: {exc}") from None
        return cls(parent)

    def create(self, name: str, memory_mib: int, cpu_milli: int) -> Path:
        """A task's cgroup with its limits (0: unlimited); the task joins it before exec."""
        group = self.parent / name
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(memory_mib * MIB) if memory_mib else "max")
        quota = max(1000, cpu_milli * CPU_PERIOD_US // 1000) if cpu_milli else "max"
        (group / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        return group

    def remove(self, name: str) -> None:
        """Remove an ended task's cgroup (the kernel refuses while a process is left in it)."""
        with contextlib.suppress(OSError):
            (self.parent / name).rmdir()


def detect_cgroup(conf: Confinement, *, mountinfo: Path = Path("/proc/self/mountinfo")) -> CgroupV2 | str:
    """The cgroup v2 directory task cgroups go under, or why there is none (limits then use rlimits)."""
    if not conf.limits:
        return "limits are off"
    if conf.cgroup_parent is not None:
        try:
            return CgroupV2.open(conf.cgroup_parent)
        except ConfinementError as exc:
            return str(exc)
    mount = _cgroup2_mount(mountinfo)
    if mount is None:
        return "no cgroup v2 mount"
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return f"cannot read /proc/self/cgroup: {exc}"
    # Only in the root cgroup may the agent enable controllers for a child while it has processes
    # ("no internal processes"); elsewhere the operator delegates a directory (cgroup_parent).
    if "0::/" not in own:
        return "the agent is not in the root cgroup: set cgroup_parent to a delegated cgroup v2 directory"
    parent = mount / "suanli-tasks"
    try:
        CgroupV2.open(mount)  # first: a mount without the controllers is left untouched
        parent.mkdir(exist_ok=True)
        return CgroupV2.open(parent)
    except (OSError, ConfinementError) as exc:
        return f"{parent}: {exc}"


def _cgroup2_mount(mountinfo: Path) -> Path | None:
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        before, _, after = line.partition(" - ")
        parts = before.split()
        if after.split()[:1] == ["cgroup2"] and len(parts) > 4:
            return Path(parts[4])
    return None


# Run as `python -I -S -c _CONFINE CGROUP AS_BYTES CPU_SECONDS UID GID PATH ARG...` (empty or 0: not
# applied). In this order: the cgroup's files and the limits may need the agent's privileges, which the
# process gives up last; then it becomes the task (same pid: cgroup, limits and user carry over the exec).
# The soft CPU limit sends SIGXCPU, the hard one a second later SIGKILL.
_CONFINE = (
    "import os, resource, sys\n"
    "cgroup, memory, cpu, uid, gid = sys.argv[1:6]\n"
    "memory, cpu = int(memory), int(cpu)\n"
    "if cgroup:\n    with open(cgroup, 'w') as procs:\n        procs.write('0')\n"
    "if memory:\n    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))\n"
    "if cpu:\n    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))\n"
    "if uid:\n    os.setgroups([]); os.setgid(int(gid)); os.setuid(int(uid))\n"
    "os.execv(sys.argv[6], sys.argv[6:])\n"
)


def confined_command(
    executable: str,
    args: Sequence[str],
    *,
    cgroup: Path | None,
    memory_bytes: int,
    cpu_seconds: int,
    user: TaskUser | None,
) -> list[str]:
    """The argv that runs ``executable`` (a resolved path) with ``args`` in its cgroup, under the rlimits,
    as the task's user: a minimal Python (isolated, no site: ~10 ms) confines itself, then execs the task.

    Not a ``preexec_fn``: that runs Python code in a fork of the agent, a process full of gRPC and Kafka
    threads, and with ``RLIMIT_AS`` (below the agent's own virtual size) already in force there, the child
    died with SIGSEGV before its exec now and then: a task that never wrote a line, exit code -11.
    Popen's own ``user=`` is not used either: it drops the privileges before the cgroup is joined.
    """
    if cgroup is None and not memory_bytes and not cpu_seconds and user is None:
        return [executable, *args]
    settings = [
        str(cgroup / "cgroup.procs") if cgroup is not None else "",
        str(memory_bytes),
        str(cpu_seconds),
        str(user.uid) if user is not None else "",
        str(user.gid) if user is not None else "",
    ]
    return [sys.executable, "-I", "-S", "-c", _CONFINE, *settings, executable, *args]
