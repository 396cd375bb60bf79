"""Queue position and estimated start (`squeue --start`): the replay of a queue over pooled capacity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from suanli.scheduling.domain.queueing.start_estimate import Held, Room, Waiting, estimate_starts

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
POOL = Room(cpu_milli=64_000, memory_mib=256_000, gpu_milli={"A100": 4000})


def _at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def _gpu(
    job_id: str,
    seq: int,
    gpus: int,
    duration_s: float | None = 600.0,
    *,
    priority: int = 0,
    gpu_models: frozenset[str] = frozenset(),
    reason: str = "",
) -> Waiting:
    return Waiting(job_id, priority, seq, 1000, 1000, gpus * 1000, gpu_models, duration_s, reason)


def _held(gpus: int, ends_in_s: float | None) -> Held:
    return Held(1000, 1000, gpus * 1000, "A100", None if ends_in_s is None else _at(ends_in_s))


def test_a_job_that_fits_now_starts_now_and_the_next_waits_for_the_room_it_takes() -> None:
    out = estimate_starts([_gpu("a", 1, 3), _gpu("b", 2, 2)], POOL, [], NOW)
    assert (out["a"].position, out["a"].waiting, out["a"].start_at) == (1, 2, NOW)
    # b needs 2 of the 1 GPU left: it starts when a ends, 600 s on.
    assert (out["b"].position, out["b"].start_at) == (2, _at(600))


def test_running_tasks_free_their_room_at_their_declared_end_earliest_first() -> None:
    held = [_held(2, 300), _held(2, 900)]
    out = estimate_starts([_gpu("a", 1, 2), _gpu("b", 2, 2)], POOL, held, NOW)
    assert out["a"].start_at == _at(300)
    # b: the 900 s release, not before a (no overtaking: the queue admits in order).
    assert out["b"].start_at == _at(900)


def test_priority_orders_the_queue_before_submission() -> None:
    out = estimate_starts([_gpu("old", 1, 4), _gpu("urgent", 2, 4, priority=100)], POOL, [], NOW)
    assert (out["urgent"].position, out["urgent"].start_at) == (1, NOW)
    assert (out["old"].position, out["old"].start_at) == (2, _at(600))


def test_room_held_without_a_declared_duration_makes_the_start_unknown_and_says_why() -> None:
    out = estimate_starts([_gpu("a", 1, 2), _gpu("b", 2, 1)], POOL, [_held(3, None)], NOW)
    assert out["a"].start_at is None
    assert out["a"].note == "its room is held by tasks that declare no duration_s"
    # Behind an unknown start, every start is unknown: nothing overtakes it.
    assert out["b"].start_at is None and out["b"].note.startswith("behind job a")


def test_a_job_waiting_on_quota_or_too_big_for_the_pool_has_no_capacity_estimate() -> None:
    out = estimate_starts([_gpu("q", 1, 1, reason="QUOTA_EXCEEDED")], POOL, [], NOW)
    assert out["q"].start_at is None and out["q"].note == "waits on QUOTA_EXCEEDED, not on capacity"
    out = estimate_starts([_gpu("big", 1, 8)], POOL, [], NOW)
    assert out["big"].note == "the schedulable nodes together never hold its gang"


def test_gpu_models_the_job_names_are_the_only_room_it_takes() -> None:
    pool = Room(64_000, 256_000, {"A100": 1000, "H100": 2000})
    busy = [Held(0, 0, 2000, "H100", _at(120))]
    out = estimate_starts([_gpu("h", 1, 1, gpu_models=frozenset({"H100"}))], pool, busy, NOW)
    assert out["h"].start_at == _at(120)  # the free A100 is not one it accepts
    out = estimate_starts([_gpu("any", 1, 1)], pool, busy, NOW)
    assert out["any"].start_at == NOW


def test_cpu_only_jobs_wait_on_cpu_and_memory() -> None:
    pool = Room(4000, 8000, {})
    held = [Held(3000, 1000, 0, "", _at(60))]
    out = estimate_starts([Waiting("c", 0, 1, 2000, 1000, 0, duration_s=10.0)], pool, held, NOW)
    assert out["c"].start_at == _at(60)
