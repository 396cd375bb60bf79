"""The network view: what a probe, the timer and a seed make it publish (clock injected as ms)."""

from __future__ import annotations

from dataclasses import replace

from suanli.routing.domain.links import LinkStatus, Probe, ViewPolicy
from suanli.routing.domain.view import NetworkView

POLICY = ViewPolicy(probe_interval_ms=1000, down_after=3, republish_ms=10_000)


def probe(at_ms: int, rtt: float = 40.0, *, loss: float = 0.0, src: str = "tok-1") -> Probe:
    return Probe("Tokyo", src, "Sydney", "syd-1", rtt, 1.0, loss, None, 5, at_ms)


def ids(states) -> list[str]:
    return [s.link_id for s in states]


def test_first_round_publishes_the_site_path_and_its_region_pair() -> None:
    view = NetworkView(POLICY)
    out = view.observe(probe(1000), 1010)
    assert ids(out) == ["tok-1->syd-1", "region:Tokyo->Sydney"]
    assert out[1].status is LinkStatus.OK


def test_unchanged_rounds_publish_nothing_until_republish_is_due() -> None:
    view = NetworkView(POLICY)
    view.observe(probe(1000), 1000)
    assert view.observe(probe(2000, 40.5), 2000) == []
    assert view.check(3000) == []
    due = view.check(11_000)
    assert sorted(ids(due)) == ["region:Tokyo->Sydney", "tok-1->syd-1"]
    assert {s.link_id: s.rounds for s in due}["tok-1->syd-1"] == 2  # the current state, not the first
    assert view.check(12_000) == []


def test_a_silent_link_goes_down_on_the_timer_and_takes_its_region_down() -> None:
    view = NetworkView(POLICY)
    view.observe(probe(1000), 1000)
    assert view.check(3999) == []
    out = view.check(4000)
    assert [(s.link_id, s.status) for s in out] == [
        ("tok-1->syd-1", LinkStatus.DOWN),
        ("region:Tokyo->Sydney", LinkStatus.DOWN),
    ]
    assert view.check(5000) == []


def test_the_timer_checks_only_the_pairs_it_owns() -> None:
    view = NetworkView(POLICY)
    view.observe(probe(1000), 1000)
    assert view.check(60_000, lambda pair: False) == []
    assert len(view.check(60_000, lambda pair: pair == ("Tokyo", "Sydney"))) == 2


def test_a_seeded_view_continues_from_the_published_state() -> None:
    first = NetworkView(POLICY)
    published = first.observe(probe(1000, 40.0), 1000) + first.observe(probe(2000, 120.0), 2000)
    latest = {s.link_id: s for s in published}
    restarted = NetworkView(POLICY)
    restarted.seed(latest.values(), 2500)
    assert restarted.observe(probe(2000, 500.0), 2600) == []  # a replay of a folded round
    out = restarted.observe(probe(3000, 120.0), 3000)
    site = next(s for s in out if s.scope == "site")
    assert site.baseline_rtt_ms == 40.0 and site.status is LinkStatus.DEGRADED
    # and a seeded link that never speaks again still goes down
    silent = NetworkView(POLICY)
    silent.seed([replace(latest["tok-1->syd-1"], last_probe_ms=2000)], 2500)
    assert [s.status for s in silent.check(5000)] == [LinkStatus.DOWN, LinkStatus.DOWN]


def test_silence_is_judged_at_how_far_the_probe_stream_was_read_not_at_the_wall_clock() -> None:
    # A processor working through a backlog (after a restart or a rebalance) has folded rounds up to
    # 5 s while the wall clock says 60 s: the path was probed all along and is not DOWN.
    view = NetworkView(POLICY)
    for at in range(1000, 6000, 1000):
        view.observe(probe(at), 60_000)
    assert view.check(60_000, silence_at=lambda pair: 5000) == []
    assert view.check(60_000, silence_at=lambda pair: None) == []  # not judged yet
    # A path silent within the stream itself still goes DOWN at the stream's time.
    view.observe(probe(1000, src="tok-2"), 60_000)
    out = view.check(60_000, silence_at=lambda pair: 5000)
    assert [(s.link_id, s.status) for s in out][:1] == [("tok-2->syd-1", LinkStatus.DOWN)]
    assert out[0].reason == "no probe for 4.0 s (4.0 probe intervals)"
    assert view.links["tok-1->syd-1"].status is LinkStatus.OK


def test_the_quiet_time_is_the_longest_silence_a_held_path_may_keep() -> None:
    view = NetworkView(POLICY)
    assert view.quiet_ms() == 3000  # nothing held: down_after x the configured interval
    view.observe(probe(1000), 1000)
    view.observe(probe(3000), 3000)  # this path's own interval: 2 s
    assert view.quiet_ms() == 6000
