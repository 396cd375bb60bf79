"""Workload construction (METHOD.md section 2), binning (section 4) and trace reading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.simulator.metrics import arrived_bins, binned
from suanli.scheduling.simulator.traces import load_pods, workload_name
from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

SHARE = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=500)
WHOLE = TaskRequest(cpu_milli=2000, gpu_count=2, gpu_milli=1000)
CPU = TaskRequest(cpu_milli=4000)


def test_inflation_appends_resamples_until_the_target_would_be_passed() -> None:
    original = [SHARE, WHOLE, CPU] * 4  # 10,000 milli of GPU
    arrivals = build_arrivals(original, capacity_gpu_milli=10_000, tune=1.3, rng=np.random.default_rng(1))
    assert sorted(map(id, arrivals[:12])) == sorted(map(id, original))  # every original, shuffled
    assert arrivals[:12] != original
    total = sum(r.total_gpu_milli for r in arrivals)
    assert 12_000 <= total <= 13_000 + 2000  # the stop test adds the per-GPU milli, as the paper's simulator
    assert len(arrivals) > 12


def test_deflation_removes_random_pods_down_to_the_target() -> None:
    original = [WHOLE] * 10  # 20,000 milli
    arrivals = build_arrivals(original, capacity_gpu_milli=10_000, tune=1.3, rng=np.random.default_rng(1))
    assert sum(r.total_gpu_milli for r in arrivals) == 12_000


def test_same_seed_same_workload() -> None:
    original = [SHARE, WHOLE, CPU] * 5
    a = build_arrivals(original, 8000, 1.3, np.random.default_rng(3))
    b = build_arrivals(original, 8000, 1.3, np.random.default_rng(3))
    assert a == b


def test_typical_distribution_covers_95_percent() -> None:
    requests = [SHARE] * 60 + [WHOLE] * 36 + [CPU] * 3 + [TaskRequest(cpu_milli=1)]
    tasks = workload_distribution(requests)
    assert [(t.gpu_milli, t.gpu_count) for t in tasks] == [(500, 1), (1000, 2)]
    assert sum(t.weight for t in tasks) == pytest.approx(1.0)


def test_binning_by_rounded_arrived_percent_with_neighbour_fallback() -> None:
    bins = arrived_bins(np.array([0.0, 50.0, 149.0, 151.0, 400.0]), capacity_milli=100)
    assert bins.tolist() == [0, 50, 149, 151, 400]
    curve = binned(np.array([1.0, 2.0, 3.0, 5.0, 9.0]), bins, top=150)
    assert curve[50] == 2.0 and curve[149] == 3.0
    assert curve[150] == pytest.approx(4.0)  # no event at 150: mean of events within +/- 1
    assert curve[100] == 2.0  # nothing near 100: the state after the last arrival (bin 50) carries on


def test_reading_pod_lists(tmp_path: Path) -> None:
    path = tmp_path / "openb_pod_list_tiny.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,1000,512,1,1500,T4|P100,LS,Running,0,10,0\n"
        "p1,2000,512,0,0,,BE,Running,5,,5\n"
    )
    pods = load_pods(path)
    assert pods[0].request.gpu_milli == 1000  # clipped like the paper's simulator
    assert pods[0].request.gpu_models == ("T4", "P100")
    assert (pods[1].creation_time, pods[1].deletion_time) == (5, None)
    assert workload_name(path) == "tiny"
    assert workload_name(tmp_path / "mine.csv") == "mine"
