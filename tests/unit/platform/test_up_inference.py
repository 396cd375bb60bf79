"""`suanli up`'s inference service as the run shows it: replica tracking, scale events, GPU-seconds, the
dashboard's panel, the headless line and the summary (pure parts; the live stack is the e2e test's)."""

from __future__ import annotations

import json

from rich.console import Console, RenderableType

from suanli.inference.attainment import DriveStats, Outcome, SloTarget
from suanli.platform.dashboard import Status, dashboard, progress_line
from suanli.platform.demo_service import DEMO_SERVICE, demo_spec
from suanli.platform.inference_figures import (
    GPU_SECONDS_SOURCE,
    InferenceStatus,
    InferenceSummary,
    ReplicaTrack,
    ScaleEvent,
    gpu_seconds,
    summarise,
)
from suanli.platform.observe import Observation
from suanli.platform.summary import Summary, render_summary


def text(renderable: RenderableType, width: int = 120) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def drive_figures() -> DriveStats:
    stats = DriveStats(SloTarget(2.0, 0.1))
    for n in range(40):
        stats.record(Outcome(n / 4, 200, 0.4 if n % 10 else 30.0, 50, ttft_s=0.1))
    for n in range(10):
        stats.record(Outcome(n, 503, 0.002, 50))
    return stats


def test_every_change_of_the_desired_count_is_a_scale_event_and_every_replica_job_is_kept() -> None:
    track = ReplicaTrack()
    track.observe(1.0, 2, [("requested", ""), ("pending", "j1")])
    track.observe(2.0, 2, [("running", "j1"), ("running", "j2")])
    track.observe(9.04, 4, [("running", "j1"), ("running", "j2"), ("pending", "j3"), ("requested", "")])
    track.observe(20.0, 3, [("running", "j1"), ("running", "j2"), ("running", "j3")])
    assert track.scale_events == [ScaleEvent(9.0, 2, 4), ScaleEvent(20.0, 4, 3)]
    assert track.job_ids == {"j1", "j2", "j3"}
    assert (track.desired, track.peak_running, track.states["running"]) == (3, 3, 3)


def test_gpu_seconds_are_the_replica_jobs_gpu_hours() -> None:
    assert gpu_seconds([0.01, 0.005]) == 54.0  # 0.015 GPU-hours
    assert gpu_seconds([]) == 0.0


def test_the_demo_service_has_a_latency_slo_and_no_block_serving_refuses() -> None:
    spec = demo_spec()
    assert spec["target"] == {"ttft_ms": 2000, "tpot_ms": 100}
    assert {k: v for k, v in spec.items() if k != "autoscaling"} == DEMO_SERVICE


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
