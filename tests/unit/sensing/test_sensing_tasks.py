"""The task table's state machine and the parsing of orders from ``placements``."""

from __future__ import annotations

import datetime as dt

import pytest

from suanli.sensing.domain.placement import (
    DeviceShare,
    InvalidOrder,
    Placement,
    parse_placement,
    parse_stop,
    task_environment,
)
from suanli.sensing.domain.tasks import (
    FailureKind,
    RunState,
    TaskFailed,
    TaskFinished,
    TaskStarted,
    TaskTable,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def placement(task_id: str = "t1", attempt: int = 1, *shares: tuple[int, int]) -> Placement:
    return Placement(task_id, "j1", "n1", attempt, tuple(DeviceShare(i, m) for i, m in shares))


def table() -> TaskTable:
    return TaskTable(device_indices=frozenset({0, 1}))


def test_admit_start_exit_reports_finished_with_the_exit_code() -> None:
    t = table()
    admission = t.admit(placement("t1", 1, (0, 1000)))
    assert admission.run is not None and admission.event is None
    assert t.task_ids() == ["t1"]
    assert t.started("t1", 99, T0) == TaskStarted(admission.run.placement, 99)
    assert t.get("t1").state is RunState.RUNNING  # type: ignore[union-attr]
    assert t.exited("t1", 3) == TaskFinished(admission.run.placement, 3)
    assert t.task_ids() == []


def test_a_redelivered_placement_is_ignored_while_running_and_after_it_ended() -> None:
    t = table()
    t.admit(placement("t1", 1))
    assert t.admit(placement("t1", 1)).duplicate
    t.started("t1", 1, T0)
    t.exited("t1", 0)
    assert t.admit(placement("t1", 1)).duplicate
    assert t.admit(placement("t1", 2)).run is not None  # a retry is a new attempt


def test_admission_refuses_missing_devices_and_overcommitment() -> None:
    t = table()
    refused = t.admit(placement("t1", 1, (5, 1000))).event
    assert isinstance(refused, TaskFailed) and refused.kind is FailureKind.ERROR
    assert "no device [5]" in refused.reason
    assert t.admit(placement("a", 1, (0, 600))).run is not None
    assert t.admit(placement("b", 1, (0, 400))).run is not None  # shares up to 1000 fit
    over = t.admit(placement("c", 1, (0, 1))).event
    assert over is not None and "over-committed" in over.reason
    assert t.milli_by_device() == {0: 1000}


def test_a_second_attempt_while_the_first_runs_is_refused() -> None:
    t = table()
    t.admit(placement("t1", 1))
    refused = t.admit(placement("t1", 2)).event
    assert refused is not None and "attempt 1" in refused.reason


def test_stop_then_exit_reports_killed() -> None:
    t = table()
    run = t.admit(placement("t1", 1)).run
    assert run is not None
    t.started("t1", 7, T0)
    assert t.request_stop("t1", 2, "preempted") is None  # other attempt: not ours to stop
    assert t.request_stop("t1", 1, "preempted: quota") is run
    assert run.state is RunState.STOPPING
    assert t.request_stop("t1", 1, "again") is None
    assert t.exited("t1", -15) == TaskFailed(run.placement, FailureKind.KILLED, "preempted: quota", -15)


def test_launch_failure_reports_error_and_frees_the_devices() -> None:
    t = table()
    t.admit(placement("t1", 1, (1, 1000)))
    failed = t.launch_failed("t1", "no such file")
    assert failed is not None and failed.kind is FailureKind.ERROR and "no such file" in failed.reason
    assert t.milli_by_device() == {}
    assert t.exited("t1", 0) is None  # nothing left to report twice


def test_stop_before_start_keeps_stopping() -> None:
    t = table()
    t.admit(placement("t1", 1))
    t.request_stop("t1", 1, "preempted")
    assert t.started("t1", 5, T0) is not None
    assert t.get("t1").state is RunState.STOPPING  # type: ignore[union-attr]


def test_parse_placement_reads_the_contract_record() -> None:
    record = {
        "task_id": "t1",
        "job_id": "j1",
        "node_id": "n1",
        "attempt": 2,
        "devices": [{"index": 0, "milli": 500}],
        "requests": {
            "cpu_milli": 4000,
            "memory_mib": 8192,
            "gpu_count": 1,
            "gpu_milli": 500,
            "gpu_memory_mib": 10240,
            "gpu_model": None,
        },
        "command": ["python", "-c", "pass"],
        "env": {"A": "1"},
    }
    p = parse_placement(record)
    assert (p.task_id, p.attempt, p.devices, p.cpu_milli, p.gpu_memory_mib) == (
        "t1",
        2,
        (DeviceShare(0, 500),),
        4000,
        10240,
    )
    assert p.command == ("python", "-c", "pass") and p.env == {"A": "1"}


@pytest.mark.parametrize(
    "bad",
    [
        {"job_id": "j", "node_id": "n", "attempt": 1},
        {"task_id": "t", "job_id": "j", "node_id": "n", "attempt": 0},
        {"task_id": "t", "job_id": "j", "node_id": "n", "attempt": 1, "devices": [{"index": 0, "milli": 0}]},
        {
            "task_id": "t",
            "job_id": "j",
            "node_id": "n",
            "attempt": 1,
            "devices": [{"index": 0, "milli": 10}, {"index": 0, "milli": 10}],
        },
    ],
)
def test_parse_placement_refuses_what_it_cannot_act_on(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidOrder):
        parse_placement(bad)


def test_parse_stop_and_sim_duration() -> None:
    stop = parse_stop({"task_id": "t", "job_id": "j", "node_id": "n", "attempt": 1, "reason": "quota"})
    assert stop.reason == "quota"
    p = Placement("t", "j", "n", 1, env={"SUANLI_SIM_DURATION_S": "2.5"})
    assert p.sim_duration_s(60) == 2.5 and Placement("t", "j", "n", 1).sim_duration_s(60) == 60
    with pytest.raises(InvalidOrder):
        Placement("t", "j", "n", 1, env={"SUANLI_SIM_DURATION_S": "soon"}).sim_duration_s(1)


def test_task_environment_exposes_devices_share_and_limits() -> None:
    shared = Placement("t", "j", "n", 1, (DeviceShare(3, 250),), gpu_memory_mib=4096)
    env = task_environment(shared, "n")
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["SUANLI_GPU_MILLI"] == "250"
    assert env["SUANLI_GPU_MEMORY_MIB"] == "4096" and env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    whole = task_environment(Placement("t", "j", "n", 1, (DeviceShare(0), DeviceShare(1))), "n")
    assert whole["CUDA_VISIBLE_DEVICES"] == "0,1" and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in whole
    assert task_environment(Placement("t", "j", "n", 1), "n")["CUDA_VISIBLE_DEVICES"] == ""
