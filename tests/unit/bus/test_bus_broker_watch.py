"""`BrokerWatch` on scripted broker answers: when a look says the broker started over."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.bus import BrokerWatch, EnsureResult, TopicSpec, topics

Looked = list[tuple[str, tuple[str, ...], str | None]]


def scripted(*answers: EnsureResult) -> tuple[BrokerWatch, Looked]:
    pending = list(answers)
    looked: Looked = []

    async def ensure(bootstrap: str, specs: Sequence[TopicSpec], prefix: str | None) -> EnsureResult:
        looked.append((bootstrap, tuple(s.name for s in specs), prefix))
        return pending.pop(0)

    return BrokerWatch("b:9092", (topics.PLACEMENTS,), prefix="p", ensure=ensure), looked


async def test_the_first_look_creates_and_takes_the_id_later_ones_compare() -> None:
    watch, looked = scripted(
        EnsureResult(("p.placements",), (), "c1"),  # first look: what it created was never there
        EnsureResult((), ("p.placements",), "c1"),
        EnsureResult((), ("p.placements",), "c2"),  # someone else recreated the topics: only the id says
        EnsureResult((), ("p.placements",), "c2"),
        EnsureResult(("p.placements",), (), None),  # a broker with no id: the missing topic says
        EnsureResult((), ("p.placements",), None),  # no id this time: the last one known stands
        EnsureResult((), ("p.placements",), "c2"),
    )
    assert [await watch.look() for _ in range(7)] == [False, False, True, False, True, False, False]
    assert looked[0] == ("b:9092", ("placements",), "p")


async def test_a_broker_that_never_says_its_id_is_judged_by_missing_topics() -> None:
    watch, _ = scripted(
        EnsureResult((), ("p.placements",), None),
        EnsureResult((), ("p.placements",), None),
        EnsureResult(("p.placements",), (), None),
    )
    assert [await watch.look() for _ in range(3)] == [False, False, True]


async def test_a_fork_starts_from_what_its_parent_saw_and_looks_on_its_own() -> None:
    watch, _ = scripted(
        EnsureResult((), ("p.placements",), "c1"),
        EnsureResult((), ("p.placements",), "c2"),  # the parent's second look
        EnsureResult((), ("p.placements",), "c2"),  # the fork's first: it still knew c1
    )
    assert await watch.look() is False
    fork = watch.fork()
    assert await watch.look() is True
    assert await fork.look() is True
