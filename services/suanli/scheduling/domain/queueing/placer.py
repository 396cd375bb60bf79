"""The one seam to the placement framework: place a whole gang on what is free, or say why not.

The queueing core decides *whether* and *when* a job runs (quota, order, preemption, reservations); a
Placer decides *where*. The core hands the placer a view of free capacity that already accounts for this
cycle's admissions, evictions and reservations, so a placer needs no state of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from suanli.scheduling.domain.model import Job, Node, TaskPlacement


@dataclass(frozen=True, slots=True)
class NodeAvailability:
    """What may still be placed on a node. `gpu_milli[i]` is the room left on `node.gpus[i]`; it can
    exceed 1000 only in a view built for best-effort shared-GPU work under an overcommit ratio."""

    node: Node
    cpu_milli: int
    memory_mib: int
    gpu_milli: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """At least `job.gang_size` tasks placed; tasks past the gang size are included when they fit."""

    placements: tuple[TaskPlacement, ...]


@dataclass(frozen=True, slots=True)
class NoFit:
    """The gang could not be placed. `placed` tasks fitted before the placer gave up (the rest were
    discarded); `rejections` counts, per filter name, the nodes that filter rejected for the first task
    that did not fit, sorted by filter name. When the placer chose among regions, `regions` says per
    region why the job is not there, and `network_excluded` that the job's network constraint (RTT to its
    data region, a DOWN link) ruled out every region it could use."""

    placed: int
    required: int
    rejections: tuple[tuple[str, int], ...] = ()
    regions: tuple[tuple[str, str], ...] = ()
    network_excluded: bool = False


class Placer(Protocol):
    def place_gang(self, nodes: tuple[NodeAvailability, ...], job: Job) -> GangPlacement | NoFit: ...
