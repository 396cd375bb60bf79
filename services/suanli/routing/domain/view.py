"""The network-state view: every site path's state, the region pairs' summaries, what to publish when.

`NetworkView` is the processor's whole state. ``observe`` folds a probe round and ``check`` runs on a
timer (stale links go DOWN, unchanged states are republished every ``republish_ms``); both return the
states to publish now: only those that changed meaningfully (`links.differs`) or are due again, so the
volume on ``network.links`` stays modest whatever the probe rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from suanli.routing.domain.links import (
    SITE,
    LinkState,
    Probe,
    ViewPolicy,
    differs,
    expire,
    fold,
    summarise,
)


def _everything(pair: tuple[str, str]) -> bool:
    return True


class NetworkView:
    def __init__(self, policy: ViewPolicy) -> None:
        self.policy = policy
        self.links: dict[str, LinkState] = {}
        self.regions: dict[tuple[str, str], LinkState] = {}
        self._by_pair: dict[tuple[str, str], set[str]] = {}
        self._published: dict[str, tuple[LinkState, int]] = {}

    def seed(self, states: Iterable[LinkState], now_ms: int) -> None:
        """Start from states published before (read back from ``network.links`` at start-up)."""
        for state in states:
            if state.scope == SITE:
                self._put(state)
            else:
                self.regions[state.region_pair] = state
            self._published[state.link_id] = (state, now_ms)

    def observe(self, probe: Probe, now_ms: int) -> list[LinkState]:
        """Fold one probe round; the states to publish because of it."""
        before = self.links.get(probe.link_id)
        after = fold(before, probe, self.policy)
        if after is before:
            return []
        self._put(after)
        return self._due([after, self._summary(after.region_pair)], now_ms)

    def check(
        self,
        now_ms: int,
        owns: Callable[[tuple[str, str]], bool] = _everything,
        silence_at: Callable[[tuple[str, str]], int | None] | None = None,
    ) -> list[LinkState]:
        """Stale links DOWN, and every state whose last publication is ``republish_ms`` old.

        ``owns`` limits both to the region pairs this instance folds (others may be seeded here only).
        ``silence_at``: the time a pair's silence is judged at (how far its probe stream has been read;
        None: not judged yet), so a processor working through a backlog does not take its own lag for
        silent paths; ``now_ms`` when not given.
        """
        expired: list[LinkState] = []
        for state in list(self.links.values()):
            if not owns(state.region_pair):
                continue
            at = now_ms if silence_at is None else silence_at(state.region_pair)
            gone = None if at is None else expire(state, at, self.policy)
            if gone is not None:
                self._put(gone)
                expired.append(gone)
        pairs = sorted({s.region_pair for s in expired})
        out = self._due([*expired, *(self._summary(pair) for pair in pairs)], now_ms)
        sent = {s.link_id for s in out}
        due = [
            s
            for s, at in self._published.values()
            if now_ms - at >= self.policy.republish_ms and owns(s.region_pair)
        ]
        current = [self._current(s) for s in due if s.link_id not in sent]
        for state in current:
            self._published[state.link_id] = (state, now_ms)
        return out + current

    def quiet_ms(self) -> int:
        """The longest silence after which any path held here goes DOWN."""
        return max(
            (self.policy.stale_after_ms(s) for s in self.links.values()),
            default=self.policy.down_after * self.policy.probe_interval_ms,
        )

    def _current(self, published: LinkState) -> LinkState:
        if published.scope == SITE:
            return self.links.get(published.link_id, published)
        return self.regions.get(published.region_pair, published)

    def _put(self, state: LinkState) -> None:
        self.links[state.link_id] = state
        self._by_pair.setdefault(state.region_pair, set()).add(state.link_id)

    def _summary(self, pair: tuple[str, str]) -> LinkState:
        summary = summarise(*pair, [self.links[i] for i in sorted(self._by_pair[pair])])
        self.regions[pair] = summary
        return summary

    def _due(self, states: list[LinkState], now_ms: int) -> list[LinkState]:
        out = []
        for state in states:
            last = self._published.get(state.link_id)
            if differs(last[0] if last else None, state, self.policy):
                self._published[state.link_id] = (state, now_ms)
                out.append(state)
        return out
