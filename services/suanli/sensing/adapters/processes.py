"""Real tasks: one subprocess (its own process group) per placement, and its measured usage.

An inference replica's task is also given a port to serve on, and its load is scraped while it runs
(adapters.replica_scrape).

Stopping sends SIGTERM to the whole process group, then SIGKILL after the grace period, as a container
runtime does, so a task's children are never left behind holding GPU memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from suanli.contracts.replica_env import PORT_ENV
from suanli.sensing.adapters.confinement import (
    CgroupV2,
    Confinement,
    ConfinementError,
    base_environment,
    confined_command,
    own_home,
    resolve_user,
)
from suanli.sensing.adapters.replica_scrape import RealReplicaHosting, ReplicaScraper, free_port
from suanli.sensing.adapters.replicas import names_a_replica
from suanli.sensing.adapters.task_logs import write_owner
from suanli.sensing.domain.observation import NodeObservation
from suanli.sensing.domain.placement import Placement, task_environment
from suanli.sensing.domain.records import TaskUsage
from suanli.sensing.domain.tasks import TaskRun
from suanli.sensing.service_layer.ports import LaunchError

log = logging.getLogger(__name__)
MIB = 1024 * 1024


class ProcessTask:
    def __init__(
        self,
        process: asyncio.subprocess.Process,
        cleanup: Callable[[], None] | None = None,
        scraper: ReplicaScraper | None = None,
    ) -> None:
        self._process = process
        self.pid: int | None = process.pid
        self._escalation: asyncio.Task[None] | None = None
        self._cleanup = cleanup
        self._scraper = scraper

    async def wait(self) -> int:
        try:
            code = await self._process.wait()
        finally:
            if self._scraper is not None:
                await self._scraper.stop()
        if self._escalation is not None:
            self._escalation.cancel()
        if self._cleanup is not None:
            self._cleanup()
        return code

    def terminate(self, grace_s: float) -> None:
        if self._scraper is not None:
            self._scraper.cancel()  # a replica asked to stop draws no more traffic while it winds down
        if self._process.returncode is not None or self._escalation is not None:
            return
        self._signal(signal.SIGTERM)
        self._escalation = asyncio.create_task(self._kill_after(grace_s))

    async def _kill_after(self, grace_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._process.wait()), grace_s)
        if self._process.returncode is None:
            log.warning("task pid %s ignored SIGTERM for %.1fs: SIGKILL", self.pid, grace_s)
            self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        # The group id is the pid: the task was started in a session of its own.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)


class ProcessLauncher:
    """Starts each placed task as a confined process (`confinement`): clean environment, limits, user."""

    def __init__(
        self,
        node_id: str,
        *,
        agent_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        confinement: Confinement | None = None,
        cgroup: CgroupV2 | None = None,
        replicas: RealReplicaHosting | None = None,
    ) -> None:
        self._node_id = node_id
        self._replicas = replicas
        # Read only for the operator's pass-through names; never handed to a task as a whole.
        self._agent_env = dict(os.environ if agent_env is None else agent_env)
        self._log_dir = log_dir.resolve() if log_dir is not None else None
        self._conf = confinement or Confinement()
        if self._conf.run_as and os.geteuid() != 0:
            raise ConfinementError("run-as users per tenant need the agent to run as root")
        self._cgroup = cgroup
        self._home = own_home()

    def environment(self, placement: Placement, home: str | None = None) -> dict[str, str]:
        """A task's whole environment: base variables, then the spec's env, then the task variables."""
        base = base_environment(self._conf, self._agent_env, home or self._home)
        return {**base, **placement.env, **task_environment(placement, self._node_id)}

    async def launch(self, placement: Placement) -> ProcessTask:
        if not placement.command:
            raise LaunchError("the placement carries no command")
        try:
            user = resolve_user(self._conf, placement.tenant)
        except ConfinementError as exc:
            raise LaunchError(str(exc)) from None
        env = self.environment(placement, user.home if user is not None else None)
        scraper = None
        if self._replicas is not None and names_a_replica(placement):
            port = free_port()
            env[PORT_ENV] = str(port)
            scraper = self._replicas.scraper(placement, port)
        name = f"{placement.task_id}.{placement.attempt}"
        output: Any = None
        if self._log_dir is not None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            path = (self._log_dir / f"{name}.log").resolve()
            if path.parent != self._log_dir:  # ids are validated on parsing; this is the last line
                raise LaunchError(f"task log {path} would fall outside {self._log_dir}")
            write_owner(self._log_dir, placement)
            output = path.open("ab")
        cgroup = None
        try:
            executable = self._executable(placement, env)
            cgroup = self._task_cgroup(name, placement)
            argv = confined_command(
                executable,
                placement.command[1:],
                cgroup=cgroup,
                user=user,
                **self._rlimits(placement, cgroup),
            )
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT if output is not None else None,
                start_new_session=True,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            if cgroup is not None and self._cgroup is not None:
                self._cgroup.remove(name)
            raise LaunchError(f"{placement.command[0]!r}: {exc}") from exc
        finally:
            if output is not None:
                output.close()  # the child holds its own descriptor
        tasks_cgroup = self._cgroup
        cleanup = None
        if cgroup is not None and tasks_cgroup is not None:

            def cleanup() -> None:
                tasks_cgroup.remove(name)

        if scraper is not None:
            scraper.start()
        return ProcessTask(process, cleanup, scraper)

    def _task_cgroup(self, name: str, placement: Placement) -> Path | None:
        if self._cgroup is None or not self._conf.limits:
            return None
        return self._cgroup.create(name, placement.memory_mib, placement.cpu_milli)

    @staticmethod
    def _executable(placement: Placement, env: Mapping[str, str]) -> str:
        """The command's executable, found on the task's own PATH as exec would: a missing one is a
        launch error, not a task that starts and fails."""
        path = env.get("PATH", "")
        found = shutil.which(placement.command[0], path=path)
        if found is None:
            raise LaunchError(f"{placement.command[0]!r}: not found (the task's PATH is {path!r})")
        return found

    def _rlimits(self, placement: Placement, cgroup: Path | None) -> dict[str, int]:
        """The rlimits of a task: CPU seconds when set; virtual memory only without a cgroup."""
        memory = cpu_seconds = 0
        if self._conf.limits:
            cpu_seconds = self._conf.cpu_seconds
            if cgroup is None and placement.memory_mib and self._conf.address_space_factor > 0:
                memory = int(placement.memory_mib * MIB * self._conf.address_space_factor)
        return {"memory_bytes": memory, "cpu_seconds": cpu_seconds}


class ProcessUsageProbe:
    """CPU and memory of a task's process tree (psutil); GPU memory of those pids as NVML saw them.

    GPU utilisation is the mean utilisation of the task's devices: NVML does not attribute utilisation
    to processes without accounting mode, and a placed device is the task's (or shared by agreement).
    """

    # Past this many cached processes, the dead ones are dropped (long-lived agents, short-lived tasks).
    CACHE_LIMIT = 4096

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def usage(self, run: TaskRun, observation: NodeObservation) -> TaskUsage:
        if len(self._procs) > self.CACHE_LIMIT:
            self._procs = {pid: p for pid, p in self._procs.items() if p.is_running()}
        if run.pid is None:
            return TaskUsage()
        tree = self._tree(run.pid)
        cpu_pct = memory = 0.0
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                cpu_pct += proc.cpu_percent(interval=None)
                memory += proc.memory_info().rss
        pids = {p.pid for p in tree}
        indices = set(run.placement.device_indices)
        devices = [d for d in observation.devices if d.index in indices]
        gpu_memory = sum(p.gpu_memory_used_mib or 0 for d in devices for p in d.processes if p.pid in pids)
        utilisations = [d.utilisation_pct for d in devices if d.utilisation_pct is not None]
        return TaskUsage(
            gpu_utilisation_pct=sum(utilisations) / len(utilisations) if utilisations else 0.0,
            gpu_memory_used_mib=gpu_memory,
            cpu_milli=round(cpu_pct * 10),  # psutil: 100 % is one core, i.e. 1000 millicores
            memory_used_mib=int(memory) // MIB,
        )

    def _tree(self, pid: int) -> list[psutil.Process]:
        root = self._process(pid)
        if root is None:
            return []
        try:
            children = root.children(recursive=True)
        except psutil.Error:
            children = []
        # Keep the same Process objects between calls: cpu_percent measures since the previous call.
        return [root, *(self._process(c.pid) or c for c in children)]

    def _process(self, pid: int) -> psutil.Process | None:
        proc = self._procs.get(pid)
        if proc is not None and proc.is_running():
            return proc
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            self._procs.pop(pid, None)
            return None
        self._procs[pid] = proc
        return proc
