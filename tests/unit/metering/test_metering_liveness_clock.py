"""Liveness on the stream's time: metering's own backlog never makes a live node look silent."""

from __future__ import annotations

from metering_harness import Harness, statuses

from suanli.clock import StreamClock
from suanli.metering.testing import gpu, ms, node_snapshot

T0 = ms("2025-01-01T10:00:00")
INTERVAL = 1_000


def snapshot(node: str, seq: int, at: int) -> dict:
    return node_snapshot(node, at, sequence=seq, devices=[gpu(0)], task_ids=(), interval_ms=INTERVAL)


def test_stream_time_is_the_newest_record_while_records_flow_then_the_wall_clock_less_the_lag() -> None:
    clock = StreamClock()
    assert clock.now(5_000, quiet_ms=3_000) == 5_000  # nothing read yet: the wall clock
    clock = clock.advanced(1_000, 4_000)  # read 3 s after it was recorded: 3 s behind
    assert clock.now(6_999, quiet_ms=3_000) == 1_000
    # Nothing read for a whole timeout: the stream's time follows the wall clock, 3 s behind as last seen.
    assert clock.now(7_000, quiet_ms=3_000) == 4_000
    assert clock.advanced(500, 8_000).newest_ms == 1_000  # an older record does not move it back


async def test_a_live_node_is_not_lost_while_metering_works_through_a_backlog() -> None:
    h = Harness(T0)
    for node in ("a", "b"):
        await h.run(lambda b, n=node: h.metering.apply_snapshot(snapshot(n, 1, T0), b, T0))
    # Metering falls 4 s behind: it reads b's next snapshot (recorded at T0 + 500) only at T0 + 4 s,
    # and a's (recorded at T0 + 1 s) is still queued behind it. Both nodes are alive.
    h.clock.now_ms = T0 + 4_000
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("b", 2, T0 + 500), b, T0 + 500))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY"]  # on metering's processing time it would be LOST
    assert statuses(h.status, "b") == ["READY"]


async def test_a_silent_node_is_lost_once_the_stream_has_moved_three_intervals_past_it() -> None:
    h = Harness(T0)
    for node in ("a", "b"):
        await h.run(lambda b, n=node: h.metering.apply_snapshot(snapshot(n, 1, T0), b, T0))
    for seq, at in enumerate((T0 + 1_000, T0 + 2_000, T0 + 3_000), start=2):
        h.clock.now_ms = at + 2_000  # metering 2 s behind throughout
        await h.run(lambda b, s=seq, t=at: h.metering.apply_snapshot(snapshot("b", s, t), b, t))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY", "LOST"]
    assert statuses(h.status, "b") == ["READY"]


async def test_a_record_stamped_in_the_future_is_capped_at_our_clock() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0))
    # A producer whose clock runs 5 minutes ahead must not push the stream's time (and a's deadline).
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("skewed", 1, T0), b, T0 + 300_000))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY"]


async def test_each_node_is_judged_on_how_far_its_own_partition_has_been_read() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0, 1))
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("b", 1, T0), b, T0, 0))
    # Partition 0 is read on time; partition 1 (a's) 3 s behind: at T0 + 4 s it has reached T0 + 1 s
    # (c's snapshot), and a's own next snapshot is still queued behind it.
    for seq in range(2, 6):
        at = T0 + (seq - 1) * INTERVAL
        h.clock.now_ms = at
        await h.run(lambda b, s=seq, t=at: h.metering.apply_snapshot(snapshot("b", s, t), b, t, 0))
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("c", 1, T0 + 1_000), b, T0 + 1_000, 1))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY"]  # on the newest record of any partition it would be LOST


async def test_a_stall_of_metering_itself_declares_nothing_lost_but_lasting_silence_still_does() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0, 0))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    # Metering stalls 3.5 s (no check, no read): on coming back it cannot tell silence from its backlog.
    h.clock.now_ms = T0 + 3_500
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY"]
    # Running on time from then on, and still nothing from a: lost a timeout after the stall ended.
    for at in range(T0 + 4_000, T0 + 7_000, 500):
        h.clock.now_ms = at
        await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY", "LOST"]


async def test_a_record_timestamp_older_than_the_agents_stamp_does_not_age_the_node() -> None:
    h = Harness(T0)
    # A broker that gives every record of a batch the batch's first timestamp (2 s earlier here).
    h.clock.now_ms = T0 + 2_000
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0 + 2_000), b, T0, 0))
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("b", 1, T0 + 4_500), b, T0 + 4_500, 0))
    h.clock.now_ms = T0 + 4_500
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "a") == ["READY"]  # heard at its stamp, T0 + 2 s: 2.5 s ago, not 4.5 s


async def test_an_agent_whose_clock_runs_five_minutes_behind_is_not_taken_for_silent() -> None:
    # Both agents report every second; "slow" stamps its records (and occurred_at) 5 minutes in the past.
    # Judged on its own stamps it would be 300 s silent; it reported now, beside records of correct clocks.
    h = Harness(T0)
    for seq in range(1, 8):
        at = T0 + (seq - 1) * INTERVAL
        h.clock.now_ms = at + 50
        await h.run(lambda b, s=seq, t=at: h.metering.apply_snapshot(snapshot("ok", s, t), b, t))
        skewed = at - 300_000
        await h.run(lambda b, s=seq, t=skewed: h.metering.apply_snapshot(snapshot("slow", s, t), b, t))
        await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "ok") == ["READY"]
    assert statuses(h.status, "slow") == ["READY"]
    # And it still goes LOST once it really stops reporting.
    for seq in range(8, 12):
        at = T0 + (seq - 1) * INTERVAL
        h.clock.now_ms = at + 50
        await h.run(lambda b, s=seq, t=at: h.metering.apply_snapshot(snapshot("ok", s, t), b, t))
        await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "slow") == ["READY", "LOST"]
    assert statuses(h.status, "ok") == ["READY"]


async def test_a_restarted_worker_does_not_take_the_snapshots_it_has_not_read_yet_for_silence() -> None:
    h = Harness(T0)
    for node in ("a", "b"):
        await h.run(lambda b, n=node: h.metering.apply_snapshot(snapshot(n, 1, T0), b, T0, 0))
    # SIGKILLed; its successor recovers the same tables 20 s later, with fresh stream times in memory.
    after = Harness(T0 + 18_000)
    after.nodes, after.tasks = h.nodes, h.tasks
    for at in range(T0 + 18_000, T0 + 21_000, 1_000):  # ticks while the tables are being recovered
        after.clock.now_ms = at
        after.metering.reading(frozenset({0}), recovering=True)
        await after.run(lambda b: after.metering.check_liveness(b, lambda node: True))
    after.clock.now_ms = T0 + 21_000
    after.metering.reading(frozenset({0}), recovering=False)
    await after.run(lambda b: after.metering.check_liveness(b, lambda node: True))
    assert statuses(after.status, "a") == statuses(after.status, "b") == []  # before: both LOST here
    # Then b's snapshots flow again and a's do not: a is lost once the stream passed its deadline, b never.
    for seq, at in enumerate(range(T0 + 21_000, T0 + 25_000, 500), start=2):
        after.clock.now_ms = at
        after.metering.reading(frozenset({0}), recovering=False)
        await after.run(lambda b, s=seq, t=at: after.metering.apply_snapshot(snapshot("b", s, t), b, t, 0))
        await after.run(lambda b: after.metering.check_liveness(b, lambda node: True))
    assert statuses(after.status, "a") == ["LOST"]
    assert statuses(after.status, "b") == []


def test_a_partition_the_reader_is_behind_on_never_follows_the_wall_clock() -> None:
    clock = StreamClock().advanced(1_000, 1_500)
    assert clock.now(10_000, quiet_ms=3_000) == 9_500  # caught up and quiet: the wall clock less the lag
    assert clock.now(10_000, quiet_ms=3_000, behind=True) == 1_000  # its backlog: what was read


async def test_a_node_whose_partition_metering_has_not_read_through_is_not_lost_on_the_wall_clock() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0, 0))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    # Nothing of partition 0 is handled for 5 s while metering itself keeps running (its checks on
    # time), but the broker holds records of it metering has not handled yet: a's next snapshots may
    # be among them.
    for second in range(1, 6):
        h.clock.now_ms = T0 + second * 1_000
        await h.run(lambda b: h.metering.check_liveness(b, lambda node: True, behind={0}))
    assert statuses(h.status, "a") == ["READY"]
    # Read through, and still nothing of a's: it is silent.
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True, behind=set()))
    assert statuses(h.status, "a") == ["READY", "LOST"]


async def test_a_node_on_a_partition_read_behind_is_still_lost_once_what_was_read_passes_it() -> None:
    h = Harness(T0)
    for node in ("a", "b"):
        await h.run(lambda b, n=node: h.metering.apply_snapshot(snapshot(n, 1, T0), b, T0, 0))
    for seq in range(2, 6):  # b keeps reporting on a's partition; a does not
        at = T0 + (seq - 1) * INTERVAL
        h.clock.now_ms = at + 500
        await h.run(lambda b, s=seq, t=at: h.metering.apply_snapshot(snapshot("b", s, t), b, t, 0))
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True, behind={0}))
    assert statuses(h.status, "a") == ["READY", "LOST"]  # a real silence, read past, is not hidden
    assert statuses(h.status, "b") == ["READY"]


async def test_nodes_are_not_lost_while_the_broker_answers_no_fetch_and_get_a_whole_timeout_after() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0, 0))
    # The broker stops answering right after (down, restarting): metering keeps running and checking
    # on time, and the last answer for partition 0 stays at T0 + 200 for 20 s.
    for second in range(1, 21):
        h.clock.now_ms = T0 + second * 1_000
        await h.run(lambda b: h.metering.check_liveness(b, lambda node: True, heard={0: T0 + 200}))
    assert statuses(h.status, "a") == ["READY"]
    # It answers again at T0 + 20.5 s, with nothing from a yet: a gets a whole timeout from the last
    # check made while it was silent, as after a stall of metering's own.
    for at in (T0 + 21_000, T0 + 22_000, T0 + 22_999):
        h.clock.now_ms = at
        await h.run(lambda b, t=at: h.metering.check_liveness(b, lambda node: True, heard={0: t - 100}))
    assert statuses(h.status, "a") == ["READY"]
    h.clock.now_ms = T0 + 23_000
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True, heard={0: T0 + 22_900}))
    assert statuses(h.status, "a") == ["READY", "LOST"]  # answered, and a still silent: lost


async def test_a_node_whose_partition_the_broker_answers_is_lost_on_time() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("a", 1, T0), b, T0, 0))
    for second in range(1, 4):
        h.clock.now_ms = T0 + second * 1_000
        await h.run(lambda b, t=h.clock.now_ms: h.metering.check_liveness(b, lambda node: True, heard={0: t}))
    assert statuses(h.status, "a") == ["READY", "LOST"]
