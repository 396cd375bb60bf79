"""How far a stream processor has read a topic it judges silence on, against what the broker holds.

A checker that declares a source silent (a node lost, a network path down) must know when the silence is
its own: records at the broker it has not handled yet (`ReadPositions.behind`), or a broker it has not
heard from lately (`ReadPositions.heard`). Both feed `suanli.clock.StreamTimes.judge`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ReadPositions:
    """Per partition of ``topic`` assigned to a faust worker, the offset after the last record handled.

    ``app``: the faust app whose consumer reads the topic (built by `suanli.bus.faust.processor_app`,
    whose consumer tells when the broker last answered a fetch).
    """

    def __init__(self, app: Any, topic: str) -> None:
        self.app = app
        self.topic = topic
        self._handled: dict[int, int] = {}

    def handled(self, events: Iterable[Any]) -> None:
        """Faust events of the topic were handled.

        The last one counts, not the highest ever: after a seek back, or a broker that started over, the
        partition is read again from a lower offset.
        """
        for event in events:
            m = event.message
            if m.topic == self.topic:
                self._handled[m.partition] = m.offset + 1

    def behind(self) -> frozenset[int]:
        """Partitions whose end at the broker lies past the last record handled.

        The end is the high watermark of the last fetch; what lies before it is the reader's own
        backlog, where silence proves nothing.

        A partition nothing was handled from since the start is left to the reader's start-up rule; on
        Tansu the watermark can trail by part of a batch, so a partition may be taken as read through a
        little early, never late.
        """
        return frozenset(
            tp.partition
            for tp, end, at in self._positions()
            if end is not None and at is not None and at < end
        )

    def heard(self) -> dict[int | None, int | None]:
        """Per partition, when the broker last answered a fetch of it from the log this worker reads.

        None: not lately. For `StreamTimes.judge`.

        Silence proves nothing while the broker is down or restarting (it answers no fetch), nor once it
        started over empty: it answers fetches past its new end with no records and no error (Tansu,
        ARCHITECTURE §3) until the worker reads the recreated topic from its beginning.
        """
        consumer = self.app.consumer
        heard: dict[int | None, int | None] = {}
        for tp, end, at in self._positions():
            past_the_end = end is not None and at is not None and at > end
            heard[tp.partition] = None if past_the_end else consumer.heard_at_ms(tp)
        return heard

    def _positions(self) -> list[tuple[Any, int | None, int | None]]:
        """(faust TP, its high watermark, the offset after the last record handled) per partition."""
        consumer = self.app.consumer
        return [
            (tp, consumer.highwater(tp), self._handled.get(tp.partition))
            for tp in self.app.assignor.assigned_actives()
            if tp.topic == self.topic
        ]
