"""The network parts of `suanli up`'s view: routing's matrix, where each placement went and why, the
network-aware jobs in the summary, and the whole view still inside 120 columns; the inference service's
panel, headless line and summary section."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from rich.console import Console, RenderableType

from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.data import data_path
from suanli.inference.attainment import DriveStats, Outcome, SloTarget
from suanli.platform.dashboard import (
    Status,
    cohort_rows,
    cohorts_panel,
    dashboard,
    decisions_panel,
    network_panel,
    progress_line,
    short_region,
)
from suanli.platform.inference_figures import (
    GPU_SECONDS_SOURCE,
    InferenceStatus,
    InferenceSummary,
    ReplicaTrack,
    gpu_seconds,
    summarise,
)
from suanli.platform.observe import Decision, Observation, TenantCharges
from suanli.platform.stack import Stack, StackConfig
from suanli.platform.summary import (
    NetworkPlacement,
    PreemptionSeen,
    Summary,
    network_placements,
    render_summary,
)
from suanli.platform.up import _endpoints
from suanli.sensing.adapters.fleet_file import load_fleet


def text(renderable: RenderableType, width: int = 120) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def link(src: str, dst: str, rtt: float, status: rpb.LinkStatus = rpb.LINK_STATUS_OK) -> rpb.Link:
    return rpb.Link(src_region=src, dst_region=dst, rtt_ms=rtt, status=status)


@pytest.mark.parametrize(
    ("region", "short"),
    [("frankfurt", "fra"), ("washington-dc", "wdc"), ("sao-paulo", "spa"), ("tokyo", "tok")],
)
def test_short_region_names_head_the_matrix_columns(region: str, short: str) -> None:
    assert short_region(region) == short


def test_the_network_panel_is_routings_matrix_coloured_by_status() -> None:
    links = [
        link("frankfurt", "tokyo", 401.2, rpb.LINK_STATUS_DEGRADED),
        link("tokyo", "frankfurt", 398.0, rpb.LINK_STATUS_DEGRADED),
        link("frankfurt", "washington-dc", 97.6),
        link("washington-dc", "frankfurt", 98.4),
        link("tokyo", "washington-dc", 0.0, rpb.LINK_STATUS_DOWN),
    ]
    rows = {line.split()[1]: line.split()[2:5] for line in text(network_panel(links)).splitlines()[2:5]}
    # Rows from, columns to (fra tok wdc); the diagonal is a dot, a missing pair a dash.
    assert rows == {
        "frankfurt": ["·", "401", "98"],
        "tokyo": ["398", "·", "×"],
        "washington-dc": ["98", "-", "·"],
    }
    assert "3 ok" not in text(network_panel(links)) and "2 ok, 2 degraded, 1 down" in text(
        network_panel(links)
    )


def test_the_network_panel_says_when_routing_does_not_answer_or_has_heard_nothing() -> None:
    assert "routing is not answering" in text(network_panel(None))
    assert "no probe round yet" in text(network_panel([]))


def test_each_placement_shows_its_region_rtt_to_the_data_region_and_price_inside_half_the_view() -> None:
    decisions = [
        Decision(
            0, "j1", "chat-tokyo-012", "j1-server-1", "tok1-t4-005", "0@0.25", "tokyo", "tokyo", 0.4, 0.42
        ),
        Decision(
            0, "j2", "resnet50-ddp-029", "j2-worker-3", "wdc1-h100-010", "3", "washington-dc", "", None, 3.1
        ),
        Decision(
            0, "j3", "report-near-data-016", "j3-query-0", "fra1-cpu-001", "", "frankfurt", "washington-dc"
        ),
    ]
    lines = text(decisions_panel(decisions, "CNY"), width=59).splitlines()
    assert "CNY/H" in lines[1]
    assert lines[2].split()[-4:-1] == ["tok", "0", "0.42"]
    assert lines[3].split()[-4:-1] == ["wdc", "-", "3.10"]  # no data region: no RTT to show
    assert lines[4].split()[-4:-1] == ["fra", "?", "-"]  # a data region, but nothing measured
    assert max(len(line) for line in lines) <= 59


@pytest.mark.parametrize("fleet", ["demo-3regions.yaml", "world-10regions.yaml"])
def test_the_whole_view_fits_120_columns_with_the_matrix(fleet: str) -> None:
    nodes = [
        pb.Node(
            id=n.identity.node_id,
            region=n.identity.region,
            status="READY",
            cpu_milli=n.cpu_cores * 1000,
            free_cpu_milli=n.cpu_cores * 1000,
            devices=[pb.Device(index=i, model=n.gpu_model, free_milli=1000) for i in range(n.gpus)],
        )
        for n in load_fleet(data_path(f"deploy/fleets/{fleet}")).nodes
    ]
    regions = sorted({n.region for n in nodes})
    links = [link(a, b, 235.0) for a in regions for b in regions if a != b]
    observation = Observation(
        at=0,
        nodes=nodes,
        queues=[pb.Queue(name="globex")],
        charges={"globex": TenantCharges(Decimal("0.5"), 2, "CNY")},
        network=links,
    )
    decision = Decision(
        0,
        "j",
        "finetune-near-data-010",
        "j-worker-1",
        "fra1-a100-003",
        "0,1",
        "frankfurt",
        "frankfurt",
        0.9,
        12.5,
    )
    status = Status("submitting", 38, 25, 25, {pb.JOB_STATE_RUNNING: 10}, 74, 0.04, logs=".suanli/up/logs")
    view = text(dashboard(status, observation, [], [decision]))
    assert max(len(line) for line in view.splitlines()) <= 120
    assert "Network (routing's view, RTT ms)" in view and "CNY/H" in view
    heads = next(line for line in view.splitlines() if "FROM \\ TO" in line)
    assert [short_region(r) for r in regions] == heads.split("TO", 1)[1].split("│")[0].split()
    assert "12.50" in view


def _job(name: str, data_region: str, max_rtt: float | None, *tasks: tuple[str, float | None]) -> pb.Job:
    spec = pb.JobSpec(name=name, data_region=data_region)
    if max_rtt is not None:
        spec.max_rtt_ms = max_rtt
    job = pb.Job(spec=spec, state=pb.JOB_STATE_SUCCEEDED)
    for region, rtt in tasks:
        task = job.tasks.add(region=region, node_id=f"{region}-1")
        if rtt is not None:
            task.rtt_ms = rtt
    return job


def test_the_summary_lists_where_each_network_aware_job_ran_and_how_far_from_its_data() -> None:
    jobs = [
        _job("chat-tokyo-012", "tokyo", 20.0, ("tokyo", 0.5), ("tokyo", 0.7)),
        _job("report-near-data-006", "washington-dc", None, ("washington-dc", None)),
        _job("resnet50-ddp-001", "", None, ("frankfurt", None)),
    ]
    placed = network_placements(jobs)
    assert placed == [
        NetworkPlacement("chat-tokyo-012", "succeeded", "tokyo", 20.0, ["tokyo"], 0.7),
        NetworkPlacement("report-near-data-006", "succeeded", "washington-dc", None, ["washington-dc"], None),
    ]
    summary = Summary(
        submitted=3,
        succeeded=3,
        failed=0,
        cancelled=0,
        unfinished=0,
        rejected=0,
        all_final=True,
        gpu_utilisation_avg=0.0,
        gpu_utilisation_peak=0.0,
        fragmentation_avg=0.0,
        gpus_total=0.0,
        placements=3,
        charges={},
        charge_counts={},
        currency="CNY",
        healthy=True,
        problems=[],
        leftover_processes=[],
        wall_s=1.0,
        submit_s=1.0,
        drain_s=0.0,
        network_placements=placed,
    )
    printed = text(render_summary(summary))
    assert "Network-aware placements (2 jobs named a data region)" in printed
    row = next(line for line in printed.splitlines() if line.startswith("chat-tokyo-012"))
    assert row.split() == ["chat-tokyo-012", "succeeded", "tokyo", "20", "ms", "tokyo", "1", "ms"]
    assert '"regions": [\n        "tokyo"\n      ]' in summary.to_json()


def _quota(flavour: str, guaranteed: int, used: int, **limits: int) -> pb.ResourceAmount:
    return pb.ResourceAmount(
        flavour=flavour, guaranteed=guaranteed, used=used, borrowed=max(0, used - guaranteed), **limits
    )


def _cohort() -> list[pb.Queue]:
    h100 = "gpu:H100 SXM"
    return [
        pb.Queue(name="acme", resources=[_quota(h100, 80000, 72000)]),
        pb.Queue(name="acme/vision", cohort="acme-teams", resources=[_quota(h100, 40000, 64000)]),
        pb.Queue(
            name="acme/nlp", cohort="acme-teams", resources=[_quota(h100, 40000, 8000, lending_limit=24000)]
        ),
        pb.Queue(name="globex", resources=[_quota("gpu:H200", 48000, 32000)]),
    ]


def test_the_cohort_panel_shows_what_one_team_borrows_and_the_other_lends() -> None:
    assert cohort_rows(_cohort()) == [
        ("acme/vision", "gpu:H100 SXM", 40000, 64000, 24000, 0),
        ("acme/nlp", "gpu:H100 SXM", 40000, 8000, 0, 24000),
    ]
    lines = text(cohorts_panel(_cohort()), width=59).splitlines()
    assert "acme-teams" in lines[0]
    assert lines[2].split()[1:-1] == ["acme/vision", "H100", "SXM", "40", "64", "24", "-"]
    assert lines[3].split()[1:-1] == ["acme/nlp", "H100", "SXM", "40", "8", "-", "24"]
    assert max(len(line) for line in lines) <= 59


def _pending(job_id: str, name: str, queue: str, code: str, message: str) -> pb.Job:
    return pb.Job(
        id=job_id,
        spec=pb.JobSpec(name=name, queue=queue),
        state=pb.JOB_STATE_PENDING,
        pending_reason=pb.PendingReason(code=code, message=message),
    )


def test_the_whole_view_with_the_scenario_fits_120_columns_without_cutting_names_or_reasons() -> None:
    nodes = [
        pb.Node(
            id=n.identity.node_id,
            region=n.identity.region,
            status="READY",
            cpu_milli=n.cpu_cores * 1000,
            free_cpu_milli=n.cpu_cores * 1000,
            devices=[pb.Device(index=i, model=n.gpu_model, free_milli=1000) for i in range(n.gpus)],
        )
        for n in load_fleet(data_path("deploy/fleets/demo-3regions.yaml")).nodes
    ]
    over = "quota of queue globex exceeded for gpu:H200: requested 56000, available 16000"
    jobs = [
        _pending("j8", "llm-serve-405b-008", "globex", "QUOTA_EXCEEDED", over),
        _pending(
            "j25",
            "urgent-report-025",
            "initech",
            "WAITING_FOR_PREEMPTION",
            "waiting for 1 preempted job(s) to stop: j5",
        ),
        _pending(
            "j15", "finetune-near-data-015", "acme/nlp", "NO_NODE_FITS", "0/100 nodes fit: 90 rejected by gpu"
        ),
    ]
    observation = Observation(
        at=0,
        nodes=nodes,
        queues=_cohort(),
        charges={"globex": TenantCharges(Decimal("0.5"), 2, "CNY")},
        network=[],
    )
    preemptions = [PreemptionSeen("research-sweep-005", "research", "urgent-report-025", "high", "initech")]
    status = Status(
        "submitting",
        38,
        25,
        67,
        {pb.JOB_STATE_RUNNING: 10},
        74,
        0.6,
        milestones={"waited": 3, "borrowing": 1, "preemptions": 1, "over quota": 1, "invoices": 0},
    )
    view = text(dashboard(status, observation, jobs, [], preemptions))
    assert max(len(line) for line in view.splitlines()) <= 120, view
    for whole in (over, "llm-serve-405b-008", "finetune-near-data-015"):
        assert whole in view, whole
    assert "urgent-report-025 preempted research-sweep-005" in view and "Preemptions (1)" in view
    assert "priority high over research in initech" in view
    assert "Cohorts: borrowed / lent (acme-teams)" in view
    assert "waited 3  borrowing 1  preemptions 1  over quota 1  invoices 0" in view


def test_the_footer_says_where_the_scheduler_billing_routing_and_serving_listen(tmp_path: Path) -> None:
    stack = Stack(StackConfig(home=tmp_path))
    stack.scheduler_addr, stack.billing_addr, stack.routing_addr, stack.serving_addr = (
        "127.0.0.1:50051",
        "127.0.0.1:50055",
        "127.0.0.1:41234",  # a well-known port was taken: the one it got
        "127.0.0.1:50056",
    )
    reach = _endpoints(stack, None)
    status = Status("submitting", 5, 1, 25, {}, 0, 0.0, logs=".suanli/up/logs", endpoints=reach)
    view = text(dashboard(status, Observation(at=0), [], []))  # the 120 columns the view is made for
    footer = [line.rstrip() for line in view.splitlines()[-2:]]
    assert footer == [
        "scheduler 127.0.0.1:50051 · billing 127.0.0.1:50055 · routing 127.0.0.1:41234 · "
        "serving 127.0.0.1:50056 (context 'up').",
        "Ctrl-C stops everything. Logs: .suanli/up/logs",
    ]


def drive_figures() -> DriveStats:
    stats = DriveStats(SloTarget(2.0, 0.1))
    for n in range(40):
        stats.record(Outcome(n / 4, 200, 0.4 if n % 10 else 30.0, 50, ttft_s=0.1))
    for n in range(10):
        stats.record(Outcome(n, 503, 0.002, 50))
    return stats


def test_the_dashboard_shows_replicas_rate_latency_scaling_and_failures_within_120_columns() -> None:
    stats = drive_figures()
    inference = InferenceStatus(
        "chat", "llama-2-7b", 3, {"running": 2, "placed": 1}, stats.summary(10.0), 1, "2→3 at 41s"
    )
    status = Status("submitting", 50, 10, 25, {}, 3, 0.1, logs=".suanli/up/logs", inference=inference)
    view = text(dashboard(status, Observation(at=0), [], []))
    assert max(len(line) for line in view.splitlines()) <= 120
    assert "Inference: chat (llama-2-7b) via the gateway" in view
    assert "replicas 2 running/3 placed/3 desired" in view
    assert "requests 50" in view and "SLO 72%" in view  # 36 of 50 within target
    assert "scale events 1 (last 2→3 at 41s)" in view
    assert "failed: http 503 10" in view
    assert "inference replicas 2 running/3 placed/3 desired" in progress_line(status, Observation(at=0))


def test_the_summary_reports_attainment_latency_gpu_seconds_and_scale_events() -> None:
    track = ReplicaTrack()
    track.observe(1.0, 2, [("running", "j1"), ("running", "j2")])
    track.observe(30.0, 3, [("running", "j1"), ("running", "j2"), ("running", "j3")])
    base = InferenceSummary("chat", "llama-2-7b", "http://127.0.0.1:8090", 1.0)
    inference = summarise(base, drive_figures().summary(10.0), track, gpu_seconds([0.05]))
    summary = Summary(
        submitted=0, succeeded=0, failed=0, cancelled=0, unfinished=0, rejected=0, all_final=True,
        gpu_utilisation_avg=0.0, gpu_utilisation_peak=0.0, fragmentation_avg=0.0, gpus_total=0.0,
        placements=0, charges={}, charge_counts={}, currency="", healthy=True, problems=[],
        leftover_processes=[], wall_s=10.0, submit_s=10.0, drain_s=0.0, inference=inference,
    )  # fmt: skip
    view = text(render_summary(summary))
    assert "Inference: chat (llama-2-7b), the Azure trace at 1x" in view
    assert "SLO attainment  72.0% (36 within TTFT + TPOT x generated tokens)" in view
    assert "GPU-seconds     180.0 by 3 replica job(s), at most 3 running" in view
    assert "Scale events    1: 2→3 at 30s" in view
    data = json.loads(summary.to_json())["inference"]
    assert (data["requests"], data["answered"], data["slo_attainment"]) == (50, 40, 0.72)
    assert data["failures"] == {"http 503": 10}
    assert data["gpu_seconds"] == 180.0 and data["gpu_seconds_source"] == GPU_SECONDS_SOURCE
    assert data["scale_events"] == [{"at_s": 30.0, "replicas_from": 2, "replicas_to": 3}]
