"""Capacity view from a snapshot, CU conversion, and the per-region / per-model aggregation."""

from __future__ import annotations

import pytest
from metering_harness import metric_points
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.metering.adapters.metrics import MeteringMetrics
from suanli.metering.domain import (
    DeviceShare,
    NodeAllocation,
    NodeStatus,
    Resources,
    capacity_of,
    summarise,
)
from suanli.metering.domain.aggregate import CuTotals, Summary
from suanli.metering.testing import gpu, ms, node_snapshot
from suanli.resources import default_catalogue
from suanli.telemetry.names import ALLOCATED_CU

CAT = default_catalogue()
AT = ms("2025-01-01T10:00:00")


def alloc(task: str, *shares: tuple[int, int], cpu: int = 8000, memory: int = 1024) -> NodeAllocation:
    return NodeAllocation(
        task, "job", 1, "n1", tuple(DeviceShare(i, m) for i, m in shares), cpu, memory, 0, AT
    )


@pytest.mark.parametrize(
    ("model", "device_class", "cu"),
    [
        ("NVIDIA H200", "h200", 989.5),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm", 312.0),
        ("Tesla T4", "t4", 65.0),
        ("Mystery Accelerator 9", "mystery-accelerator-9", CAT.unknown_gpu_cu),
    ],
)
def test_devices_are_rated_through_the_catalogue(model: str, device_class: str, cu: float) -> None:
    cap = capacity_of(node_snapshot("n1", AT, sequence=1, devices=[gpu(0, model)]), (), CAT)
    (device,) = cap.devices
    assert (device.device_class, device.cu) == (device_class, cu)


@pytest.mark.parametrize(
    ("allocations", "used", "cu_used", "milli_free"),
    [
        ((), Resources(), 0.0, [1000, 1000]),
        ((alloc("a", (0, 1000)),), Resources(8000, 1024, 1, 1000, 0), 989.5 + 0.8, [0, 1000]),
        (
            (alloc("a", (0, 500)), alloc("b", (0, 250), (1, 1000), cpu=0)),
            Resources(8000, 2048, 2, 1750, 0),
            989.5 * 1.75 + 0.8,
            [250, 0],
        ),
        # Oversubscribed: more than a whole device allocated shows as such; nothing is free.
        (
            (alloc("a", (0, 800)), alloc("b", (0, 800), cpu=0)),
            Resources(8000, 2048, 1, 1600, 0),
            989.5 * 1.6 + 0.8,
            [0, 1000],
        ),
        # A share of a device the node does not have holds CPU and memory, not GPU.
        ((alloc("a", (7, 1000)),), Resources(8000, 1024, 0, 0, 0), 0.8, [1000, 1000]),
    ],
)
def test_used_is_what_placements_hold(
    allocations: tuple[NodeAllocation, ...], used: Resources, cu_used: float, milli_free: list[int]
) -> None:
    snap = node_snapshot("n1", AT, sequence=1, devices=[gpu(0), gpu(1)], cpu_cores=32)
    cap = capacity_of(snap, allocations, CAT)
    assert cap.used == used
    assert cap.cu_used == pytest.approx(cu_used)
    assert [d.milli_free for d in cap.devices] == milli_free


def test_total_and_allocatable_raw_and_in_cu() -> None:
    snap = node_snapshot(
        "n1", AT, sequence=1, devices=[gpu(0), gpu(1, used_mib=1000)], cpu_cores=32, memory_mib=256_000
    )
    cap = capacity_of(snap, (), CAT, reserve=Resources(cpu_milli=2000, memory_mib=16_000))
    assert cap.total == Resources(32_000, 256_000, 2, 2000, 2 * 143_771)
    assert cap.allocatable == Resources(30_000, 240_000, 2, 2000, 2 * 143_771)
    assert cap.cu_total == pytest.approx(2 * 989.5 + 3.2)
    assert cap.cu_allocatable == pytest.approx(2 * 989.5 + 3.0)
    assert [d.memory_free_mib for d in cap.devices] == [143_771, 142_771]
    assert (cap.region, cap.zone, cap.site) == ("cn-north", "cn-north-a", "cn-north-dc1")


def test_cpu_only_node_has_cpu_cu_only() -> None:
    cap = capacity_of(node_snapshot("c1", AT, sequence=1, cpu_cores=96), (), CAT)
    assert cap.total.gpu_count == 0
    assert cap.cu_total == pytest.approx(9.6)


def test_summary_by_region_and_model_counts_ready_nodes_only() -> None:
    a = capacity_of(node_snapshot("a", AT, sequence=1, devices=[gpu(0), gpu(1)], cpu_cores=10), (), CAT)
    b = capacity_of(
        node_snapshot("b", AT, sequence=1, devices=[gpu(0, "Tesla T4")], cpu_cores=10),
        (alloc("x", (0, 500), cpu=5000),),
        CAT,
    )
    c = capacity_of(node_snapshot("c", AT, sequence=1, region="cn-east", devices=[gpu(0)]), (), CAT)
    lost = capacity_of(node_snapshot("d", AT, sequence=1, devices=[gpu(0)]), (), CAT)
    summary = summarise(
        [(a, NodeStatus.READY), (b, NodeStatus.READY), (c, NodeStatus.READY), (lost, NodeStatus.LOST)]
    )
    north = {m: t for (r, m), t in summary.by_region_model.items() if r == "cn-north"}
    assert north["h200"].allocatable == pytest.approx(2 * 989.5)
    assert north["t4"].allocatable == pytest.approx(65.0)
    assert north["t4"].used == pytest.approx(32.5)
    assert north["cpu"].allocatable == pytest.approx(2.0)
    assert north["cpu"].used == pytest.approx(0.5)
    assert summary.by_region["cn-north"].utilisation == pytest.approx(33.0 / (2 * 989.5 + 65 + 2))
    assert summary.by_region["cn-east"].allocatable == pytest.approx(989.5 + 6.4)
    assert summary.nodes == {
        ("cn-north", NodeStatus.READY): 2,
        ("cn-east", NodeStatus.READY): 1,
        ("cn-north", NodeStatus.LOST): 1,
    }


def test_allocated_cu_is_served_per_region_and_model_and_drops_to_zero_when_gone() -> None:
    reader = InMemoryMetricReader()
    gauges = MeteringMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    h200, cpu = CuTotals(989.5, 494.75), CuTotals(6.4, 0.2)
    gauges.observe(Summary({("cn", "h200"): h200, ("cn", "cpu"): cpu}, {"cn": h200 + cpu}))
    allocated = {k[1]: v for k, v in metric_points(reader).items() if k[0] == ALLOCATED_CU}
    assert allocated == {
        (("gpu_model", "h200"), ("region", "cn")): 494.75,
        (("gpu_model", "cpu"), ("region", "cn")): 0.2,
    }
    gauges.observe(Summary({("cn", "cpu"): cpu}, {"cn": cpu}))  # the GPU node was lost
    allocated = {k[1]: v for k, v in metric_points(reader).items() if k[0] == ALLOCATED_CU}
    assert allocated[(("gpu_model", "h200"), ("region", "cn"))] == 0
