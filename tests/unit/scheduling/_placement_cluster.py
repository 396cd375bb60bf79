"""Tiny hand-built clusters for the placement tests."""

from __future__ import annotations

from suanli.scheduling.domain.model import GpuDevice, Node
from suanli.scheduling.domain.snapshot import ClusterSnapshot


def node(
    name: str,
    gpus: list[int] | tuple[int, ...] = (),
    cpu: int = 32_000,
    mem: int = 65_536,
    model: str = "A100",
    free_cpu: int | None = None,
    region: str = "default",
    labels: tuple[tuple[str, str], ...] = (),
) -> Node:
    """`gpus` lists each device's free milli (1000 = idle)."""
    devices = tuple(GpuDevice(index=i, model=model, free_milli=f) for i, f in enumerate(gpus))
    return Node(name, cpu, mem, devices, region=region, labels=labels, free_cpu_milli=free_cpu)


def snapshot(*nodes: Node) -> ClusterSnapshot:
    return ClusterSnapshot.from_nodes(list(nodes))
