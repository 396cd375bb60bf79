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


def test_a_partition_the_broker_does_not_answer_is_not_judged_until_a_quiet_time_after_it_does() -> None:
    times = StreamTimes()
    times.read(0, 1_000, 1_000)
    # Checked every second. Partition 0 was last answered at 1,200: lately at 3,000 (1.8 s, under the
    # 2 s floor), not from 4,000 on; partition 1 never is, until 9,500.
    assert times.judge(2_000, QUIET, heard={0: 1_200, 1: 1_200})(0) == 1_000
    assert times.judge(3_000, QUIET, heard={0: 1_200, 1: 1_200})(0) == 1_000
    for wall in range(4_000, 10_000, 1_000):
        time_of = times.judge(wall, QUIET, heard={0: 1_200, 1: None})
        assert (time_of(0), time_of(1)) == (None, None)
    # Answered again from 9,500: a whole quiet time from the last check that found them unanswered.
    times.read(0, 9_600, 9_700)  # the first record after the gap, far past any deadline of before
    for wall in range(10_000, 12_000, 1_000):
        time_of = times.judge(wall, QUIET, heard={0: wall - 100, 1: wall - 100})
        assert (time_of(0), time_of(1)) == (None, None)
    time_of = times.judge(12_000, QUIET, heard={0: 11_900, 1: 11_900})
    assert (time_of(0), time_of(1)) == (9_600, 12_000)
    # A partition left out of ``heard`` is judged as answered.
    assert (
        times.judge(13_000, QUIET, heard={1: 12_900})(0) == 12_900
    )  # quiet since 9,700: the wall less the lag
