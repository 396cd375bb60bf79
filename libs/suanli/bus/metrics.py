"""The bus's two metrics from the telemetry catalogue: dead letters and consumer lag."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from opentelemetry import metrics

from suanli.telemetry.names import CONSUMER_LAG, DEAD_LETTERED


class BusMetrics:
    """The bus's metrics of one consumer group: dead letters and consumer lag."""

    def __init__(self, group_id: str) -> None:
        self._group = group_id
        meter = metrics.get_meter("suanli.bus")
        self._dead_lettered = meter.create_counter(
            DEAD_LETTERED, unit="1", description="Records sent to a topic's dead-letter topic."
        )
        self._lag = meter.create_gauge(
            CONSUMER_LAG,
            unit="1",
            description="Records between a consumer group's position and the partition end.",
        )

    def dead_lettered(self, topic: str, reason: str) -> None:
        """Count one record of ``topic`` sent to its dead-letter topic for ``reason``."""
        self._dead_lettered.add(1, {"topic": topic, "reason": reason})

    def observe_lag(self, consumer: AIOKafkaConsumer, positions: dict[TopicPartition, int]) -> None:
        """Lag from the high watermarks fetch responses carry, so it costs no ListOffsets request.

        On Tansu the high watermark can trail by part of a batch, hence the clamp at zero.
        """
        per_topic: dict[str, int] = {}
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            position = positions.get(tp)
            if highwater is None or position is None:
                continue
            per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(0, highwater - position)
        for topic, lag in per_topic.items():
            self._lag.set(lag, {"group": self._group, "topic": topic})
