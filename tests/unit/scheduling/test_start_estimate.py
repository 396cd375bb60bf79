"""Queue position and estimated start (`squeue --start`): the replay of a queue over the nodes' room."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from suanli.scheduling.domain.queueing.start_estimate import (
    Held,
    Room,
    TaskDemand,
    Waiting,
    estimate_starts,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
# Two nodes of 4 GPUs each.
NODES = {"n1": Room(32_000, 128_000, 4000), "n2": Room(32_000, 128_000, 4000)}
ANY = tuple(NODES)


def _at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def _task(gpus: int, nodes: tuple[str, ...] = ANY) -> TaskDemand:
    return TaskDemand(Room(1000, 1000, gpus * 1000), nodes)


def _job(
    job_id: str,
    seq: int,
    *tasks: TaskDemand,
    duration_s: float | None = 600.0,
    priority: int = 0,
    reason: str = "",
) -> Waiting:
    return Waiting(job_id, priority, seq, tasks, duration_s, reason)


def _held(node: str, gpus: int, ends_in_s: float | None) -> Held:
    return Held(node, Room(1000, 1000, gpus * 1000), None if ends_in_s is None else _at(ends_in_s))


def test_a_job_that_fits_now_starts_now_and_the_next_waits_for_the_room_it_takes() -> None:
    out = estimate_starts([_job("a", 1, _task(4), _task(3)), _job("b", 2, _task(2))], NODES, [], NOW)
    assert (out["a"].position, out["a"].waiting, out["a"].start_at) == (1, 2, NOW)
    # a took 4 + 3 GPUs: one GPU is left, b needs 2 on one node, so it starts when a ends.
    assert (out["b"].position, out["b"].start_at) == (2, _at(600))


def test_running_tasks_free_their_room_at_their_declared_end_earliest_first() -> None:
    held = [_held("n1", 4, 300), _held("n2", 4, 900)]
    out = estimate_starts([_job("a", 1, _task(4)), _job("b", 2, _task(4))], NODES, held, NOW)
    assert out["a"].start_at == _at(300)
    # b: the 900 s release, not before a (no overtaking: the queue admits in order).
    assert out["b"].start_at == _at(900)


def test_a_task_needs_its_room_on_one_node_not_summed_over_nodes() -> None:
    held = [_held("n1", 2, 300), _held("n2", 2, 600)]
    # 4 GPUs are free in all, 2 on each node: a 4-GPU task waits for one node to empty.
    out = estimate_starts([_job("a", 1, _task(4))], NODES, held, NOW)
    assert out["a"].start_at == _at(300)


def test_priority_orders_the_queue_before_submission() -> None:
    big = (_task(4), _task(4))
    out = estimate_starts([_job("old", 1, *big), _job("urgent", 2, *big, priority=100)], NODES, [], NOW)
    assert (out["urgent"].position, out["urgent"].start_at) == (1, NOW)
    assert (out["old"].position, out["old"].start_at) == (2, _at(600))


def test_room_held_without_a_declared_duration_makes_the_start_unknown_and_says_why() -> None:
    held = [_held("n1", 4, None), _held("n2", 3, None)]
    out = estimate_starts([_job("a", 1, _task(2)), _job("b", 2, _task(1))], NODES, held, NOW)
    assert out["a"].start_at is None
    assert out["a"].note == "its room is held by tasks that declare no duration_s"
    # Behind an unknown start, every start is unknown: nothing overtakes it.
    assert out["b"].start_at is None and out["b"].note.startswith("behind job a")


def test_a_job_waiting_on_quota_or_on_nodes_it_cannot_use_has_no_estimate() -> None:
    out = estimate_starts([_job("q", 1, _task(1), reason="QUOTA_EXCEEDED")], NODES, [], NOW)
    assert out["q"].start_at is None and out["q"].note == "waits on QUOTA_EXCEEDED, not on capacity"
    out = estimate_starts([_job("big", 1, _task(8))], NODES, [], NOW)
    assert out["big"].note == "no nodes it may run on hold its gang, even empty"
    out = estimate_starts([_job("none", 1, _task(1, ()))], NODES, [], NOW)
    assert out["none"].start_at is None


def test_the_nodes_a_task_may_run_on_are_the_only_room_it_takes() -> None:
    held = [_held("n2", 4, 120)]
    out = estimate_starts([_job("pinned", 1, _task(1, ("n2",)))], NODES, held, NOW)
    assert out["pinned"].start_at == _at(120)  # n1's free GPUs are not ones it may use
    out = estimate_starts([_job("any", 1, _task(1))], NODES, held, NOW)
    assert out["any"].start_at == NOW


def test_free_room_the_cycle_found_no_fit_in_is_not_promised_now() -> None:
    out = estimate_starts([_job("frag", 1, _task(1), reason="NO_NODE_FITS")], NODES, [], NOW)
    assert out["frag"].start_at is None
    assert out["frag"].note == "room looks free now, yet the cycle found none that fits (NO_NODE_FITS)"
    # Waiting for capacity coming free later is estimated as usual.
    held = [_held("n1", 4, 60), _held("n2", 4, 60)]
    out = estimate_starts([_job("later", 1, _task(1), reason="NO_NODE_FITS")], NODES, held, NOW)
    assert out["later"].start_at == _at(60)


def test_cpu_only_jobs_wait_on_cpu_and_memory() -> None:
    nodes = {"c1": Room(4000, 8000, 0)}
    held = [Held("c1", Room(3000, 1000, 0), _at(60))]
    task = TaskDemand(Room(2000, 1000, 0), ("c1",))
    out = estimate_starts([_job("c", 1, task, duration_s=10.0)], nodes, held, NOW)
    assert out["c"].start_at == _at(60)
