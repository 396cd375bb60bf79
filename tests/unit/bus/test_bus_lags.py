"""Consumer lag from high watermarks and positions (suanli.bus.metrics.lags), as every consumer serves it."""

from __future__ import annotations

from aiokafka import TopicPartition

from suanli.bus.metrics import lags


def test_lag_sums_partitions_per_topic_and_skips_what_is_unknown() -> None:
    a0, a1, b0, c0 = (
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 0),
        TopicPartition("c", 0),
    )
    ends = {a0: 10, a1: 5, b0: 3, c0: None}
    positions = {a0: 4, a1: 5, b0: 7, c0: 1}  # b0's high watermark trails (Tansu): never below zero
    assert lags([a0, a1, b0, c0], ends.get, positions.get) == {"a": 6, "b": 0}
    assert lags([a0], ends.get, {}.get) == {}
