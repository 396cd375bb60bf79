"""The API's read view of the network: the latest `NetworkLinkChanged` per link, and who watches it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from suanli.routing.domain.links import REGION, SITE, LinkState

# A watcher that falls this far behind loses its stream (it reconnects and gets the state again)
# rather than holding memory for every change it has not read.
WATCH_BACKLOG = 10_000


class NetworkState:
    def __init__(self) -> None:
        self.links: dict[str, LinkState] = {}
        self.version = 0
        self._watchers: set[asyncio.Queue[LinkState | None]] = set()

    def apply(self, state: LinkState) -> bool:
        """Keep ``state`` unless an equal or newer one is already held (a compacted topic replays)."""
        held = self.links.get(state.link_id)
        if held is not None and (held == state or held.last_probe_ms > state.last_probe_ms):
            return False
        self.links[state.link_id] = state
        self.version += 1
        for queue in list(self._watchers):
            if queue.qsize() >= WATCH_BACKLOG:
                self._watchers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(state)
        return True

    def scoped(self, scope: str) -> list[LinkState]:
        return sorted((s for s in self.links.values() if s.scope == scope), key=lambda s: s.link_id)

    def region_links(self) -> list[LinkState]:
        return self.scoped(REGION)

    def site_links(self) -> list[LinkState]:
        return self.scoped(SITE)

    def regions(self) -> set[str]:
        return {r for s in self.links.values() for r in s.region_pair}

    @contextmanager
    def watch(self) -> Iterator[asyncio.Queue[LinkState | None]]:
        """A queue of every change from now on; None in it means the watcher was dropped as too slow."""
        queue: asyncio.Queue[LinkState | None] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            yield queue
        finally:
            self._watchers.discard(queue)
