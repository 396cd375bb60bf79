"""`BrokerWatch`: tells a long-lived client that the broker started over.

The embedded broker keeps everything in memory: a restart loses every topic, committed offset and group.
A consumer still connected across it can go on fetching from its old position, past the end of the
recreated topic, and skip what is written there without an error. A client that looks every few seconds
(creating what is missing, comparing the cluster id) learns of the restart and rebuilds its consumers,
which then read the new topics from the start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from suanli.bus.admin import EnsureResult, ensure_topics
from suanli.bus.topics import TopicSpec

Ensure = Callable[[str, Sequence[TopicSpec], str | None], Awaitable[EnsureResult]]


async def _ensure(bootstrap: str, topics: Sequence[TopicSpec], prefix: str | None) -> EnsureResult:
    return await ensure_topics(bootstrap, topics, prefix=prefix)


class BrokerWatch:
    """Looks at the broker on request: creates missing topics and says whether it started over."""

    def __init__(
        self,
        bootstrap: str,
        topics: Sequence[TopicSpec],
        *,
        prefix: str | None = None,
        ensure: Ensure = _ensure,
    ) -> None:
        self._bootstrap = bootstrap
        self._topics = tuple(topics)
        self._prefix = prefix
        self._ensure = ensure
        self._cluster_id: str | None = None
        self._looked = False

    def fork(self) -> BrokerWatch:
        """Another watch of the same topics that has seen what this one saw.

        Looks change a watch's state, so every keeper of a consumer needs its own; a fork made after the
        first look starts from its cluster id rather than from nothing.
        """
        fork = BrokerWatch(self._bootstrap, self._topics, prefix=self._prefix, ensure=self._ensure)
        fork._cluster_id, fork._looked = self._cluster_id, self._looked
        return fork

    async def look(self) -> bool:
        """Create the missing topics; True when the broker started over since the last look.

        That is: one of the topics was missing at a later look, or another cluster answers. The cluster
        id tells every client (someone else, another service or a standby, may have created the topics
        first); a created topic tells a broker that gives no id. The first look only takes the id: what
        it created was simply never there. Raises what the broker's client raises when it cannot answer.
        """
        result = await self._ensure(self._bootstrap, self._topics, self._prefix)
        first, self._looked = not self._looked, True
        before, self._cluster_id = self._cluster_id, result.cluster_id or self._cluster_id
        if first:
            return False
        return bool(result.created) or (before is not None and before != self._cluster_id)
