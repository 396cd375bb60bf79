"""The ports the agent's use cases depend on; adapters implement them, bootstrap wires them."""

from __future__ import annotations

from typing import Any, Protocol

from suanli.sensing.domain.links import LinkSample
from suanli.sensing.domain.observation import DeviceObservation, NodeObservation
from suanli.sensing.domain.placement import Placement
from suanli.sensing.domain.records import TaskUsage
from suanli.sensing.domain.tasks import TaskRun


class Collector(Protocol):
    """Everything the agent can see on its node right now."""

    def collect(self) -> NodeObservation: ...


class DeviceCollector(Protocol):
    """Accelerators only (NVML); combined with a host collector into a `Collector`."""

    def devices(self) -> tuple[DeviceObservation, ...]: ...


class EventSink(Protocol):
    """Publishes one contract event; the adapter picks topic and key from the event catalogue."""

    async def publish(self, event_name: str, record: dict[str, Any]) -> None: ...


class TaskHandle(Protocol):
    pid: int | None

    async def wait(self) -> int:
        """The exit code once the task has ended (negative: killed by that signal)."""
        ...

    def terminate(self, grace_s: float) -> None:
        """Ask the task to stop now; force it after ``grace_s``. Returns at once; ``wait`` tells the end."""
        ...


class LaunchError(RuntimeError):
    """The task could not be started (command not found, bad working directory, ...)."""


class TaskLauncher(Protocol):
    async def launch(self, placement: Placement) -> TaskHandle:
        """Start the task; raises `LaunchError` when it cannot."""
        ...


class UsageProbe(Protocol):
    def usage(self, run: TaskRun, observation: NodeObservation) -> TaskUsage: ...


class LinkProber(Protocol):
    """One round of network probes from this agent's site; one sample per destination."""

    async def probe_round(self, round_no: int) -> list[LinkSample]: ...
