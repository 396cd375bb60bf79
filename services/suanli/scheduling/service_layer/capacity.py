"""The capacity view the cycle places against, kept from full-state events: NodeCapacityChanged
(allocatable totals and devices), NodeStatusChanged (liveness) and NodeSnapshot (labels, running tasks).

A lost or repeated update heals with the next one. What is *in use* never comes from here: the scheduler
counts its own allocations (PostgreSQL), so a slow capacity stream cannot make it over-allocate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from suanli.clock import Clock
from suanli.scheduling.domain.model import GpuDevice, Node

SCHEDULABLE = frozenset({"READY", "UNKNOWN"})


@dataclass(frozen=True, slots=True)
class NodeView:
    id: str
    region: str = "default"
    zone: str = "default"
    site: str = ""
    cpu_milli: int = 0
    memory_mib: int = 0
    devices: tuple[GpuDevice, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    status: str = "UNKNOWN"
    status_at: datetime | None = None
    has_capacity: bool = False

    @property
    def schedulable(self) -> bool:
        return self.has_capacity and self.status in SCHEDULABLE and len({d.model for d in self.devices}) <= 1

    def node(self) -> Node:
        return Node(
            self.id, self.cpu_milli, self.memory_mib, self.devices, self.region, self.zone, self.labels
        )


class CapacityView:
    def __init__(self, clock: Clock | None = None) -> None:
        self.nodes: dict[str, NodeView] = {}
        # When the view last heard a record (with a clock): its age is what an operator alerts on.
        self._clock = clock
        self._heard_at: datetime | None = None
        # The Node handed out for each view, kept while the view is unchanged: a placer that finds the
        # same Node objects as in its last snapshot updates that snapshot instead of building another.
        self._handed_out: dict[str, tuple[NodeView, Node]] = {}
        # The schedulable nodes as last listed, kept until a view changes: the cycle carries what it
        # counted for this very tuple (`CycleMemo`), and most records (snapshots, capacity republished
        # when due) change nothing.
        self._listed: tuple[Node, ...] | None = None

    def _heard(self, node_id: str) -> NodeView:
        """The node's current view, as a record about it arrives (stamping the view's age)."""
        if self._clock is not None:
            self._heard_at = self._clock.now()
        return self.nodes.get(node_id) or NodeView(node_id)

    def age_s(self) -> float | None:
        """Seconds since the last node record arrived; None before the first (or without a clock)."""
        if self._clock is None or self._heard_at is None:
            return None
        return max(0.0, (self._clock.now() - self._heard_at).total_seconds())

    def on_capacity(self, r: Mapping[str, Any]) -> NodeView:
        alloc = r["allocatable"]
        devices = tuple(
            GpuDevice(int(d["index"]), str(d["model"]), int(d.get("memory_total_mib") or 0))
            for d in sorted(r.get("devices") or (), key=lambda d: d["index"])
        )
        view = replace(
            self._heard(r["node_id"]),
            region=r["region"] or "default",
            zone=r["zone"] or "default",
            site=r.get("site") or "",
            cpu_milli=int(alloc["cpu_milli"]),
            memory_mib=int(alloc["memory_mib"]),
            devices=devices,
            has_capacity=True,
        )
        self._put(view)
        return view

    def on_status(self, r: Mapping[str, Any]) -> NodeView:
        view = replace(self._heard(r["node_id"]), status=str(r["status"]), status_at=r.get("occurred_at"))
        self._put(view)
        return view

    def on_snapshot(self, r: Mapping[str, Any]) -> NodeView:
        current = self._heard(r["node_id"])
        view = replace(
            current,
            labels=tuple(sorted((r.get("labels") or {}).items())),
            region=r.get("region") or current.region,
            zone=r.get("zone") or current.zone,
        )
        self._put(view)
        return view

    def _put(self, view: NodeView) -> None:
        if self.nodes.get(view.id) != view:
            self._listed = None
        self.nodes[view.id] = view

    def schedulable(self) -> tuple[Node, ...]:
        """The nodes a cycle may place on, by id; the same tuple while no view changed."""
        if self._listed is None:
            self._listed = tuple(
                self._node(v) for v in sorted(self.nodes.values(), key=lambda v: v.id) if v.schedulable
            )
        return self._listed

    def gpu_models(self) -> frozenset[str]:
        """The GPU models the nodes report, as they spell them (known nodes, whatever their status)."""
        return frozenset(d.model for v in self.nodes.values() for d in v.devices)

    def regions(self) -> dict[str, tuple[str, str]]:
        """Node id -> (region, site), written into each placement for the agent and billing."""
        return {n.id: (n.region, n.site) for n in self.nodes.values()}

    def _node(self, view: NodeView) -> Node:
        handed = self._handed_out.get(view.id)
        if handed is not None and handed[0] == view:  # republished unchanged views compare equal
            return handed[1]
        node = view.node()
        self._handed_out[view.id] = (view, node)
        return node
