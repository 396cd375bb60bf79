from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.framework import PluginContext, Profile, Scheduler
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins import default_registry
from suanli.scheduling.domain.plugins.filters import (
    CpuFilter,
    GpuFitFilter,
    GpuModelFilter,
    MemoryFilter,
    NodeSelectorFilter,
    RegionFilter,
    RequestSanity,
)

SNAP = snapshot(
    node("a100-idle", [1000, 1000], cpu=32_000, model="A100", region="east", labels=(("tier", "gold"),)),
    node("a100-busy", [300, 0], cpu=32_000, model="A100", region="west"),
    node("t4-small", [1000], cpu=4_000, mem=1024, model="T4", region="east"),
    node("cpu-only", [], cpu=64_000, region="west"),
)


@pytest.mark.parametrize(
    ("plugin", "request_", "expected"),
    [
        (CpuFilter(), TaskRequest(cpu_milli=8000), [True, True, False, True]),
        (MemoryFilter(), TaskRequest(memory_mib=2048), [True, True, False, True]),
        (
            GpuModelFilter(),
            TaskRequest(gpu_count=1, gpu_milli=500, gpu_models=("T4",)),
            [False, False, True, False],
        ),
        (GpuModelFilter(), TaskRequest(gpu_count=1, gpu_milli=500), [True] * 4),
        (GpuFitFilter(), TaskRequest(gpu_count=1, gpu_milli=300), [True, True, True, False]),
        (GpuFitFilter(), TaskRequest(gpu_count=1, gpu_milli=400), [True, False, True, False]),
        (GpuFitFilter(), TaskRequest(gpu_count=2, gpu_milli=1000), [True, False, False, False]),
        (GpuFitFilter(), TaskRequest(cpu_milli=1), [True] * 4),
        (RegionFilter(), TaskRequest(regions=("east",)), [True, False, True, False]),
        (NodeSelectorFilter(), TaskRequest(node_selector=(("tier", "gold"),)), [True, False, False, False]),
    ],
)
def test_filter_masks(plugin: object, request_: TaskRequest, expected: list[bool]) -> None:
    assert plugin.filter(SNAP, request_).tolist() == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (TaskRequest(gpu_count=4, gpu_milli=1000), "asks for 4 GPUs, the largest node has 2"),
        (TaskRequest(cpu_milli=100_000), "more than any node has"),
        (TaskRequest(cpu_milli=1000), None),
    ],
)
def test_request_sanity_admission(request_: TaskRequest, reason: str | None) -> None:
    got = RequestSanity().admit(SNAP, request_)
    assert got == reason if reason is None else reason in (got or "")


def test_diagnosis_counts_first_rejecting_filter_per_node() -> None:
    profile = Profile.from_dict(
        {"filters": ["cpu", "gpu-model", "gpu-fit"], "scores": []}, default_registry()
    )
    scheduler = Scheduler(profile, np.random.default_rng(0), PluginContext())
    result = scheduler.place_task(
        SNAP, TaskRequest(cpu_milli=8000, gpu_count=2, gpu_milli=1000, gpu_models=("T4",))
    )
    assert not result.placed
    assert dict(result.diagnosis.rejected_by) == {"cpu": 1, "gpu-model": 3}  # type: ignore[union-attr]
    assert result.diagnosis.message() == "no node fits (4 nodes): 1 rejected by cpu, 3 rejected by gpu-model"  # type: ignore[union-attr]
    assert result.snapshot is SNAP
