"""`suanli up`'s inference service: replica tracking, scale events, GPU-seconds, the demo's spec (pure parts;
its panel and summary lines are test_dashboard.py's, the live stack the e2e test's)."""

from __future__ import annotations

from suanli.platform.demo_service import DEMO_SERVICE, demo_spec
from suanli.platform.inference_figures import ReplicaTrack, ScaleEvent, gpu_seconds


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
