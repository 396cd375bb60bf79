"""Per-partition stream time: a reader's backlog or stall is never judged as its sources' silence."""

from __future__ import annotations

from suanli.clock import StreamTimes

QUIET = 3_000


def test_a_read_partition_is_judged_at_its_newest_record_while_records_flow() -> None:
    times = StreamTimes()
    times.read(0, 1_000, 10_000)  # nine seconds behind
    assert times.judge(10_100, QUIET)(0) == 1_000
    # Nothing read for a whole quiet time (checked every second): the wall clock less the lag last seen.
    assert times.judge(11_000, QUIET)(0) == 1_000
    assert times.judge(12_000, QUIET)(0) == 1_000
    assert times.judge(13_000, QUIET)(0) == 4_000


def test_unread_partitions_follow_the_wall_clock_unless_a_start_is_given() -> None:
    assert StreamTimes().judge(5_000, QUIET)(7) == 5_000
    started = StreamTimes(started_ms=5_000)
    assert started.judge(7_999, QUIET)(7) is None  # its backlog is unknown yet
    assert started.judge(8_000, QUIET)(7) == 8_000


def test_a_late_check_means_the_reader_stalled_and_restarts_the_quiet_time() -> None:
    times = StreamTimes()
    times.read(0, 1_000, 1_000)
    assert times.judge(2_000, QUIET)(0) == 1_000
    # The next check comes 5 s late (more than half the quiet time): stream time stays at the last
    # record for another quiet time, since what was not read meanwhile may be the reader's own backlog.
    assert times.judge(7_000, QUIET)(0) == 1_000
    assert times.judge(8_000, QUIET)(0) == 1_000
    assert times.judge(9_000, QUIET)(0) == 1_000
    assert times.judge(10_000, QUIET)(0) == 10_000


def test_a_restart_suspends_judgement_of_unread_partitions_for_a_quiet_time() -> None:
    times = StreamTimes()
    times.read(0, 1_000, 1_000)
    times.restart(20_000)
    assert times.judge(20_500, QUIET)(1) is None
    assert times.judge(21_000, QUIET)(0) == 1_000
    assert times.judge(23_000, QUIET)(1) == 23_000
