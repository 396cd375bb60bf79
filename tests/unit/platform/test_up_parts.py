"""The pure parts of `suanli up`: workload files and their seeded plan, GPU figures and their time average."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.data import data_path
from suanli.platform.observe import Borrowing, IssuedInvoice, Observer, Preemption, Wait
from suanli.platform.summary import (
    GpuFigures,
    TimeAverage,
    gpu_figures,
    milestones,
    milestones_section,
    started_use,
)
from suanli.platform.workload import DemoWorkloadError, load_workload, parse_workload, plan

MIXED = data_path("deploy/workloads/mixed.yaml")


def _workload(**changes: Any) -> dict[str, Any]:
    template = {
        "weight": 1,
        "duration": ["5s", "10s"],
        "spec": {"name": "etl", "queue": "initech", "tasks": [{"name": "t", "resources": {"cpu": "1"}}]},
    }
    document: dict[str, Any] = {
        "seed": 1,
        "arrivals": {"pattern": "uniform", "per_minute": 60},
        "tenants": [{"name": "initech", "mix": [template]}],
    }
    document.update(changes)
    return document


def test_the_shipped_workload_plans_every_tenant_and_kind_with_short_durations() -> None:
    workload = load_workload(MIXED)
    arrivals = plan(workload, 60, "run")
    assert 20 <= len(arrivals) <= 60
    assert {a.tenant for a in arrivals} == set(workload.tenant_names) == {"acme", "globex", "initech"}
    assert [a.at_s for a in arrivals] == sorted(a.at_s for a in arrivals) and arrivals[-1].at_s < 60
    kinds = {a.spec.kind for a in arrivals}
    assert kinds == {pb.JOB_KIND_TRAINING, pb.JOB_KIND_INFERENCE, pb.JOB_KIND_BATCH}
    # Simulated seconds, so a run of a few minutes sees jobs end and be billed.
    assert all(5 <= t.duration_s <= 90 for a in arrivals for t in a.spec.tasks)
    assert any(t.resources.gpu_milli < 1000 and t.resources.gpu_count for a in arrivals for t in a.spec.tasks)
    assert len({a.request_id for a in arrivals}) == len(arrivals)


def test_the_plan_is_a_function_of_the_seed() -> None:
    workload = load_workload(MIXED)
    first, again = plan(workload, 60, "r"), plan(workload, 60, "r")
    assert [(a.at_s, a.spec) for a in first] == [(a.at_s, a.spec) for a in again]
    other = parse_workload({**_yaml(MIXED), "seed": 99})
    assert [a.at_s for a in plan(other, 60, "r")] != [a.at_s for a in first]


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(path.read_text()))


def test_uniform_arrivals_are_evenly_spaced_and_named_by_sequence() -> None:
    arrivals = plan(parse_workload(_workload()), 5, "r")
    assert [a.at_s for a in arrivals] == [0, 1, 2, 3, 4]
    assert [a.spec.name for a in arrivals][:2] == ["etl-001", "etl-002"]
    assert all(5 <= a.spec.tasks[0].duration_s <= 10 for a in arrivals)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"arrivals": {"per_minute": 0}}, "arrivals.per_minute"),
        ({"tenants": []}, "tenants"),
        (
            {
                "tenants": [
                    {
                        "name": "acme",
                        "mix": [
                            {
                                "duration": 5,
                                "spec": {"name": "x", "queue": "initech", "tasks": [{"name": "t"}]},
                            }
                        ],
                    }
                ]
            },
            "tenants[0].mix[0].spec: queue: 'initech' does not belong to tenant 'acme'",
        ),
        (
            {
                "tenants": [
                    {
                        "name": "initech",
                        "mix": [
                            {
                                "duration": 5,
                                "spec": {
                                    "name": "x",
                                    "queue": "initech",
                                    "tasks": [{"name": "t", "replicas": 0}],
                                },
                            }
                        ],
                    }
                ]
            },
            "tenants[0].mix[0].spec: tasks[0].replicas: must be 1..1000 (got 0)",
        ),
        ({"tenants": [{"name": "initech", "mix": [{"duration": ["9s", "3s"], "spec": {}}]}]}, "above max"),
    ],
)
def test_a_bad_workload_names_the_problem(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(DemoWorkloadError, match=re.escape(problem)):
        parse_workload(_workload(**change))


def _node(status: str, *free: int) -> pb.Node:
    return pb.Node(status=status, devices=[pb.Device(index=i, free_milli=f) for i, f in enumerate(free)])


def test_gpu_figures_count_ready_nodes_and_idle_room_on_partly_used_devices() -> None:
    figures = gpu_figures([_node("READY", 1000, 0, 700), _node("LOST", 0, 0)])
    assert figures == GpuFigures(total=3000, allocated=1300, fragmented=700)
    assert figures.utilisation == pytest.approx(1300 / 3000)


def test_utilisation_counts_only_tasks_that_started() -> None:
    node = pb.Node(id="n1", status="READY", devices=[pb.Device(index=i, free_milli=0) for i in range(3)])
    job = pb.Job(
        tasks=[
            pb.TaskStatus(task_id="a", state="RUNNING", node_id="n1", gpu_indices=[0], gpu_milli=[1000]),
            pb.TaskStatus(task_id="b", state="RUNNING", node_id="n1", gpu_indices=[1], gpu_milli=[300]),
            # Placed and never started: the scheduler holds device 2 for it, but it does no work.
            pb.TaskStatus(task_id="c", state="PLACED", node_id="n1", gpu_indices=[2], gpu_milli=[1000]),
        ]
    )
    assert gpu_figures([node]).allocated == 3000  # the scheduler's view: everything held
    figures = gpu_figures([node], started_use([job]))
    assert figures == GpuFigures(total=3000, allocated=1300, fragmented=700)
    assert figures.utilisation == pytest.approx(1300 / 3000)


def test_time_average_holds_each_sample_until_the_next() -> None:
    average = TimeAverage()
    average.add(0.0, GpuFigures(1000, 0, 0))
    average.add(1.0, GpuFigures(1000, 1000, 0))
    average.add(4.0, GpuFigures(1000, 500, 500))
    assert average.utilisation == pytest.approx(3 / 4)  # 0 for 1 s, then 1.0 for 3 s
    assert average.peak_utilisation == 1.0 and average.fragmentation == 0.0


def test_the_shipped_script_reaches_every_milestone_early_and_cancels_only_the_over_quota_job() -> None:
    workload = load_workload(MIXED)
    scripted = {
        a.spec.name.rsplit("-", 1)[0]: a for a in plan(workload, 180, "run") if a.tenant and a.at_s <= 30
    }
    # docs/demo.md, "The scenario": the fill, the borrow, the preemption and the over-quota job.
    assert {"llm-pretrain", "llm-serve-h200", "research-sweep", "vision-pretrain", "llm-serve-405b"} <= set(
        scripted
    )
    assert scripted["urgent-report"].at_s == 25
    assert [n for n, a in scripted.items() if a.cancel_after_s is not None] == ["llm-serve-405b"]
    sweep, urgent = scripted["research-sweep"].spec, scripted["urgent-report"].spec
    assert (sweep.priority_class, sweep.preemptible, urgent.priority_class) == ("research", True, "high")


def test_scripted_jobs_merge_into_the_random_arrivals_in_time_order() -> None:
    job = {"name": "big", "queue": "initech", "tasks": [{"name": "t", "resources": {"cpu": "1"}}]}
    workload = parse_workload(
        _workload(
            script=[
                {"at": "1.5s", "tenant": "initech", "duration": "30s", "spec": job, "cancel_after": "10s"},
                {"at": 0, "tenant": "initech", "duration": 5, "spec": job},
            ]
        )
    )
    arrivals = plan(workload, 3, "r")
    assert [(a.seq, a.at_s, a.spec.name) for a in arrivals] == [
        (1, 0.0, "big-001"),
        (2, 0.0, "etl-002"),
        (3, 1.0, "etl-003"),
        (4, 1.5, "big-004"),
        (5, 2.0, "etl-005"),
    ]
    assert arrivals[3].cancel_after_s == 10 and arrivals[3].spec.tasks[0].duration_s == 30
    assert {a.cancel_after_s for a in arrivals if a.seq != 4} == {None}


def test_a_scripted_job_of_an_unknown_tenant_or_foreign_queue_is_refused() -> None:
    job = {"name": "big", "queue": "acme", "tasks": [{"name": "t", "resources": {"cpu": "1"}}]}
    with pytest.raises(DemoWorkloadError) as info:
        parse_workload(
            _workload(
                script=[
                    {"at": 0, "tenant": "nobody", "duration": 5, "spec": job},
                    {"at": 0, "tenant": "initech", "duration": 5, "spec": job},
                ]
            )
        )
    assert str(info.value).splitlines() == [
        "script[0].tenant: 'nobody' is not one of the tenants",
        "script[1].spec: queue: 'acme' does not belong to tenant 'initech'",
    ]


def test_the_observer_notes_waits_refusals_and_preemptions_from_reasons() -> None:
    observer = Observer("127.0.0.1:1", "127.0.0.1:1", ["initech"])
    try:
        over = pb.Job(
            id="j8",
            spec=pb.JobSpec(name="big-008", queue="globex"),
            state=pb.JOB_STATE_PENDING,
            pending_reason=pb.PendingReason(code="QUOTA_EXCEEDED", message="quota of queue globex exceeded"),
        )
        urgent = pb.Job(
            id="j9",
            spec=pb.JobSpec(name="urgent-009", queue="initech"),
            state=pb.JOB_STATE_PENDING,
            pending_reason=pb.PendingReason(
                code="WAITING_FOR_PREEMPTION", message="waiting", details={"victims": '["j5"]'}
            ),
        )
        victim = pb.Job(id="j5", spec=pb.JobSpec(name="sweep-005"), state=pb.JOB_STATE_RUNNING)
        victim.tasks.add(task_id="j5-t-0", state="STOPPING", node_id="n1", reason="preempted by j9")
        waited = pb.Job(
            id="j7",
            spec=pb.JobSpec(name="later-007"),
            state=pb.JOB_STATE_PENDING,
            pending_reason=pb.PendingReason(code="QUOTA_EXCEEDED", message="wait"),
        )
        for job in (over, urgent, victim, waited):
            observer._note_waits(job, 1.0)
        running = pb.Job(id="j7", spec=pb.JobSpec(name="later-007"), state=pb.JOB_STATE_RUNNING)
        running.tasks.add(task_id="j7-t-0", state="RUNNING", node_id="n2")
        observer._note_placements(running, 2.0)
    finally:
        observer.close()
    assert list(observer.waits) == ["j8", "j9", "j7"]
    # later-007 waited on quota and then ran: a wait, not a refusal.
    assert [w.job_name for w in observer.quota_refusals()] == ["big-008"]
    # The preemptor's reason and the victim's task reason name the same pair: noted once.
    assert list(observer.preemptions) == [("j5", "j9")]


def test_the_summary_lists_each_milestone_with_its_evidence() -> None:
    averages = TimeAverage()
    averages.add(0.0, GpuFigures(total=1000, allocated=700))
    averages.add(10.0, GpuFigures(total=1000, allocated=500))
    jobs = {
        "j5": pb.Job(id="j5", spec=pb.JobSpec(name="sweep-005", queue="initech", priority_class="research")),
        "j9": pb.Job(id="j9", spec=pb.JobSpec(name="urgent-009", queue="initech", priority_class="high")),
    }
    over = Wait("j8", "big-008", "globex", "QUOTA_EXCEEDED", "quota of queue globex exceeded for gpu:H200")
    m = milestones(
        jobs,
        [over],
        [over],
        [Preemption("j5", "j9", 3.0)],
        [Borrowing("acme/vision", "acme-teams", "gpu:H100 SXM", 40000, 24000)],
        [IssuedInvoice("inv-1", "acme", "2026-12-01T15:13Z", "CNY", Decimal("4.1"), 3)],
        averages,
    )
    assert (m.allocation_peak, m.allocation_mean) == (0.7, 0.7)
    assert m.reached == dict.fromkeys(
        ("allocation", "wait", "borrow", "preemption", "quota_refusal", "invoice"), True
    )
    assert (m.preemptions[0].preemptor, m.preemptions[0].victim_priority) == ("urgent-009", "research")
    console = Console(width=120, record=True)
    for part in milestones_section(m):
        console.print(part)
    printed = console.export_text()
    assert "✓ allocation    peak 70.0%, mean 70.0%" in printed
    assert "acme/vision borrowed 24 H100 SXM beyond its 40 (cohort acme-teams)" in printed
    assert "urgent-009 (high) preempted sweep-005 (research)" in printed
    assert "big-008: QUOTA_EXCEEDED: quota of queue globex exceeded for gpu:H200" in printed
    assert "acme 2026-12-01T15:13Z 4.1 CNY (3 lines)" in printed
    assert max(len(line) for line in printed.splitlines()) <= 120


def test_the_small_fleets_workload_plans_the_same_tenants_without_a_script() -> None:
    small = load_workload(data_path("deploy/workloads/small.yaml"))
    assert small.tenant_names == load_workload(MIXED).tenant_names and not small.script
    assert all(a.cancel_after_s is None for a in plan(small, 60, "r"))


class _Scheduler:
    """The scheduler RPCs `refresh_jobs` calls, answering from fixed messages."""

    def __init__(self, listed: list[pb.Job], described: dict[str, pb.JobDescription]) -> None:
        self.listed = listed
        self.described = described
        self.asked: list[str] = []

    def ListJobs(self, request: pb.ListJobsRequest, timeout: float) -> pb.ListJobsResponse:
        return pb.ListJobsResponse(jobs=[j for j in self.listed if j.state == request.state])

    def GetJob(self, request: pb.GetJobRequest, timeout: float) -> pb.Job:
        return next(j for j in self.listed if j.id == request.job_id)

    def DescribeJob(self, request: pb.DescribeJobRequest, timeout: float) -> pb.JobDescription:
        self.asked.append(request.job_id)
        return self.described[request.job_id]


def test_a_preemption_over_between_two_polls_is_found_in_the_victims_history() -> None:
    # No poll saw the victim stopping or the preemptor waiting: the victim just shows one more restart.
    observer = Observer("127.0.0.1:1", "127.0.0.1:1", ["initech"])
    try:
        observer.submitted(pb.Job(id="j5", spec=pb.JobSpec(name="sweep-005"), state=pb.JOB_STATE_RUNNING))
        observer.submitted(pb.Job(id="j6", spec=pb.JobSpec(name="other-006"), state=pb.JOB_STATE_RUNNING))
        restarted = pb.Job(id="j5", spec=pb.JobSpec(name="sweep-005"), state=pb.JOB_STATE_PENDING, restarts=1)
        history = pb.JobDescription(
            events=[
                pb.HistoryEvent(type="TaskPlaced", task_id="j5-t-0", attempt=1),
                pb.HistoryEvent(
                    type="TaskPreempted", task_id="j5-t-0", attempt=1, by="j9", reason="preempted by j9"
                ),
                pb.HistoryEvent(type="JobRequeued", attempt=2),
            ]
        )
        unchanged = pb.Job(id="j6", spec=pb.JobSpec(name="other-006"), state=pb.JOB_STATE_RUNNING)
        fake = _Scheduler([restarted, unchanged], {"j5": history})
        observer.scheduler = fake  # type: ignore[assignment]
        observer.refresh_jobs(3.0)
        observer.refresh_jobs(4.0)  # no new restart: not asked again
    finally:
        observer.close()
    assert list(observer.preemptions) == [("j5", "j9")]
    assert fake.asked == ["j5"]  # only the job that restarted, once
