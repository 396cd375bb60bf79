"""Usage windows: exact amounts from event timestamps, split at minute boundaries, never charged twice."""

from __future__ import annotations

from dataclasses import replace

import pytest

from suanli.metering.domain import (
    Allocation,
    Ended,
    JobKnown,
    Placed,
    RatedShare,
    Sampled,
    Seen,
    Started,
    TaskFact,
    remeter,
    replay,
    split,
)
from suanli.metering.testing import ms

T = "task-1"
H200_CU = 989.5


def placed(milli: int = 500, cpu_milli: int = 2000, attempt: int = 1, node: str = "n1") -> Placed:
    share = RatedShare(0, milli, "h200", H200_CU * milli / 1000)
    return Placed(T, "job-1", attempt, Allocation(node, (share,), cpu_milli, 0.1 * cpu_milli / 1000))


JOB = JobKnown(T, "job-1", "acme", "research")
START = Started(T, "job-1", 1, "n1", ms("2025-01-01T10:00:30"))
FINISH = Ended(T, 1, ms("2025-01-01T10:02:15"), "finished")


@pytest.mark.parametrize(
    ("start", "end", "expected_seconds"),
    [
        ("10:00:30", "10:02:15", [30, 60, 15]),
        ("10:00:00", "10:01:00", [60]),
        ("10:00:59.999", "10:01:00.001", [0.001, 0.001]),
        ("10:00:10", "10:00:50", [40]),
        ("10:00:10", "10:00:10", []),
    ],
)
def test_split_cuts_at_minute_boundaries(start: str, end: str, expected_seconds: list[float]) -> None:
    bounds = split(ms(f"2025-01-01T{start}"), ms(f"2025-01-01T{end}"))
    assert [(b - a) / 1000 for a, b in bounds] == expected_seconds
    for a, _ in bounds[1:]:
        assert a % 60_000 == 0


def test_half_gpu_from_10_00_30_to_10_02_15_gives_three_exact_windows() -> None:
    _, out = replay([JOB, placed(), START, FINISH])
    assert [(w.start_ms, w.end_ms) for w in out] == [
        (ms("2025-01-01T10:00:30"), ms("2025-01-01T10:01:00")),
        (ms("2025-01-01T10:01:00"), ms("2025-01-01T10:02:00")),
        (ms("2025-01-01T10:02:00"), ms("2025-01-01T10:02:15")),
    ]
    assert [w.gpu_milli_seconds for w in out] == [15_000, 30_000, 7_500]
    assert [w.cpu_milli_seconds for w in out] == [60_000, 120_000, 30_000]
    assert [w.cu_seconds["h200"] for w in out] == pytest.approx([494.75 * 30, 494.75 * 60, 494.75 * 15])
    assert [w.cu_seconds["cpu"] for w in out] == pytest.approx([0.2 * 30, 0.2 * 60, 0.2 * 15])
    assert {(w.charge.tenant, w.charge.queue, w.charge.job_id, w.node_id) for w in out} == {
        ("acme", "research", "job-1", "n1")
    }


def test_preempted_task_stops_at_the_preemption_time_not_at_the_later_kill() -> None:
    preempt = Ended(T, 1, ms("2025-01-01T10:01:20"), "preempted")
    killed = Ended(T, 1, ms("2025-01-01T10:01:40"), "failed")
    _, out = replay([JOB, placed(), START, preempt, killed])
    assert out[-1].end_ms == ms("2025-01-01T10:01:20")
    assert sum(w.gpu_milli_seconds for w in out) == 500 * 50


DUPLICATES: list[tuple[str, list[TaskFact]]] = [
    ("finish twice", [JOB, placed(), START, FINISH, FINISH]),
    ("everything twice", [JOB, placed(), START, FINISH, JOB, placed(), START, FINISH]),
    ("finish before start", [FINISH, JOB, placed(), START]),
    ("job last", [placed(), START, FINISH, JOB, JOB]),
    ("placement last", [START, FINISH, JOB, placed(), placed()]),
]


@pytest.mark.parametrize("facts", [f for _, f in DUPLICATES], ids=[n for n, _ in DUPLICATES])
def test_any_order_and_repeats_give_the_same_windows_once(facts: list[TaskFact]) -> None:
    _, expected = replay([JOB, placed(), START, FINISH])
    _, out = replay(facts)
    assert [(w.event_id, w.start_ms, w.end_ms, w.gpu_milli_seconds) for w in out] == [
        (w.event_id, w.start_ms, w.end_ms, w.gpu_milli_seconds) for w in expected
    ]
    assert len({w.event_id for w in out}) == 3


def test_nothing_is_charged_until_tenant_allocation_and_start_are_all_known() -> None:
    for missing in (JOB, placed(), START):
        facts = [f for f in (JOB, placed(), START, FINISH) if f != missing]
        assert replay(facts)[1] == []


@pytest.mark.parametrize("milli", [1, 3, 333, 999, 1000])
def test_windows_add_up_to_allocation_times_duration_for_awkward_shares(milli: int) -> None:
    start = Started(T, "job-1", 1, "n1", ms("2025-01-01T10:00:00.007"))
    end = Ended(T, 1, ms("2025-01-01T10:07:41.913"), "finished")
    _, out = replay([JOB, placed(milli=milli, cpu_milli=1), start, end])
    duration = end.at_ms - start.at_ms
    assert sum(w.gpu_milli_seconds for w in out) == milli * duration // 1000
    assert sum(w.cpu_milli_seconds for w in out) == duration // 1000
    assert sum(w.duration_ms for w in out) == duration


def test_running_task_is_metered_up_to_the_last_evidence_then_to_its_end() -> None:
    seen = Seen(T, "n1", ms("2025-01-01T10:02:05"))
    _, first = replay([JOB, placed(), START, seen])
    # Evidence at 10:02:05 closes the windows up to 10:02:00 and no further.
    assert [w.end_ms for w in first] == [ms("2025-01-01T10:01:00"), ms("2025-01-01T10:02:00")]
    finish = Ended(T, 1, ms("2025-01-01T10:03:10"), "finished")
    _, rest = replay([JOB, placed(), START, seen, finish, seen])
    assert [w.start_ms for w in rest] == [
        ms("2025-01-01T10:00:30"),
        ms("2025-01-01T10:01:00"),
        ms("2025-01-01T10:02:00"),
        ms("2025-01-01T10:03:00"),
    ]
    assert sum(w.gpu_milli_seconds for w in rest) == 500 * 160


def test_evidence_from_another_node_does_not_extend_an_attempt() -> None:
    _, out = replay([JOB, placed(), START, Seen(T, "n2", ms("2025-01-01T10:05:00"))])
    assert out == []


def test_attempts_are_metered_separately_with_distinct_ids() -> None:
    retry_start = Started(T, "job-1", 2, "n2", ms("2025-01-01T10:00:45"))
    retry_end = Ended(T, 2, ms("2025-01-01T10:00:50"), "finished")
    first_end = Ended(T, 1, ms("2025-01-01T10:00:40"), "failed")
    _, out = replay([JOB, placed(), START, first_end, placed(attempt=2, node="n2"), retry_start, retry_end])
    assert [(w.charge.attempt, w.node_id, w.duration_ms) for w in out] == [
        (1, "n1", 10_000),
        (2, "n2", 5_000),
    ]
    assert out[0].start_ms // 60_000 == out[1].start_ms // 60_000
    assert out[0].event_id != out[1].event_id


def test_samples_give_an_efficiency_ratio_and_never_change_the_charge() -> None:
    samples = [
        Sampled(T, 1, ms("2025-01-01T10:01:30"), 30_000, 25.0, 1, 1000),
        Sampled(T, 1, ms("2025-01-01T10:02:00"), 30_000, 35.0, 1, 1000),
    ]
    _, with_samples = replay([JOB, placed(), START, *samples, FINISH])
    _, without = replay([JOB, placed(), START, FINISH])
    # 30 % of a whole device busy on a half-device share is 0.6 of what was allocated.
    assert [w.efficiency for w in with_samples] == [None, pytest.approx(0.6), None]
    assert [w.gpu_milli_seconds for w in with_samples] == [w.gpu_milli_seconds for w in without]
    assert [dict(w.cu_seconds) for w in with_samples] == [dict(w.cu_seconds) for w in without]


JOB_TRACE = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


def test_every_window_of_an_attempt_carries_its_starts_trace_whatever_closes_it() -> None:
    started = Started(T, "job-1", 1, "n1", ms("2025-01-01T10:00:30"), trace_context=JOB_TRACE)
    seen = Seen(T, "n1", ms("2025-01-01T10:02:05"))  # a snapshot of another trace closes two windows
    # A redelivered start without a context (an older producer) does not erase the attempt's.
    again = Started(T, "job-1", 1, "n1", ms("2025-01-01T10:00:30"))
    retry = Started(T, "job-1", 2, "n2", ms("2025-01-01T10:03:20"), trace_context="")
    retried = [placed(attempt=2, node="n2"), retry, Ended(T, 2, ms("2025-01-01T10:03:30"), "finished")]
    state, out = replay([JOB, placed(), started, seen, again, FINISH, *retried])
    assert state is not None
    assert [(w.charge.attempt, w.trace_context) for w in out] == [(1, JOB_TRACE)] * 3 + [(2, "")]
    assert [a.trace_context for a in state.attempts] == [JOB_TRACE, ""]


def test_remetering_publishes_every_emitted_window_again_as_it_was_then_the_new_ones() -> None:
    seen = Seen(T, "n1", ms("2025-01-01T10:02:05"))
    sample = Sampled(T, 1, ms("2025-01-01T10:00:50"), 20_000, 80.0, 1, 1000)
    state, first = replay([JOB, placed(), START, sample, seen])
    assert state is not None and len(first) == 2
    again, out = remeter(state)
    # The same ids and amounts as first emitted (efficiency, never charged, is not kept for them).
    assert [(w.event_id, w.start_ms, w.end_ms, w.gpu_milli_seconds, w.cu_seconds) for w in out] == [
        (w.event_id, w.start_ms, w.end_ms, w.gpu_milli_seconds, w.cu_seconds) for w in first
    ]
    assert again == state  # nothing newly chargeable, how far it was metered unchanged
    # With the end known since: the emitted windows again, then the rest, adding up to the whole attempt.
    ended, _ = replay([JOB, placed(), START, sample, seen])
    assert ended is not None
    ended = replace(ended, attempts=tuple(replace(a, ended_ms=FINISH.at_ms) for a in ended.attempts))
    after, out = remeter(ended)
    assert [w.start_ms for w in out] == [START.at_ms, ms("2025-01-01T10:01:00"), ms("2025-01-01T10:02:00")]
    assert sum(w.gpu_milli_seconds for w in out) == 500 * 105
    assert after.attempts[0].metered_through_ms == FINISH.at_ms


def test_remetering_a_record_never_charged_publishes_nothing() -> None:
    state, out = replay([placed(), START, Seen(T, "n1", ms("2025-01-01T10:02:05"))])  # no payer known
    assert state is not None and out == []
    assert remeter(state) == (state, [])
