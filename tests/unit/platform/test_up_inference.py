"""`suanli up`'s inference service: replica tracking, scale events, GPU-seconds, the demo's spec, the
replay's wait for the first replicas (pure parts; its panel and summary lines are test_dashboard.py's,
the live stack the e2e test's)."""

from __future__ import annotations

import asyncio

from suanli.platform.demo_service import DEMO_SERVICE, demo_spec
from suanli.platform.inference import until_reporting
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


async def test_the_replay_waits_for_the_first_replicas_to_report() -> None:
    counts = iter([0, 0, 1, 2, 2])
    stop = asyncio.Event()
    assert await until_reporting(lambda: next(counts), 2, stop, wait_s=5.0, poll_s=0.001)
    assert next(counts) == 2  # asked until two reported, not after
    # Never reporting: the replay starts anyway at the deadline (its failures then count honestly).
    assert not await until_reporting(lambda: 0, 2, stop, wait_s=0.05, poll_s=0.01)
    stop.set()  # Ctrl-C meanwhile: no wait at all
    assert not await until_reporting(lambda: 0, 2, stop, wait_s=60.0)
