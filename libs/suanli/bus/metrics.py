"""The bus's metrics from the telemetry catalogue: dead letters, consumer lag, handling time and retries."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from opentelemetry import metrics

from suanli.telemetry.names import (
    CONSUMER_HANDLE,
    CONSUMER_LAG,
    CONSUMER_RETRIES,
    DEAD_LETTERED,
    described,
)


def lags(
    partitions: Iterable[Any], highwater: Callable[[Any], int | None], position: Callable[[Any], int | None]
) -> dict[str, int]:
    """Per topic, the records between each partition's ``position`` and its ``highwater``, summed.

    Partitions without either are left out. On Tansu the high watermark can trail by part of a batch,
    hence the clamp at zero.
    """
    per_topic: dict[str, int] = {}
    for tp in partitions:
        end, at = highwater(tp), position(tp)
        if end is None or at is None:
            continue
        per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(0, end - at)
    return per_topic


class BusMetrics:
    """The bus's metrics of one consumer group: dead letters, consumer lag, handling time and retries."""

    def __init__(self, group_id: str) -> None:
        self._group = group_id
        meter = metrics.get_meter("suanli.bus")
        # One attribute dict per topic, built once: handled() runs for every record.
        self._attributes: dict[str, dict[str, str]] = {}
        self._handle = meter.create_histogram(CONSUMER_HANDLE, **described(CONSUMER_HANDLE))
        self._retries = meter.create_counter(CONSUMER_RETRIES, **described(CONSUMER_RETRIES))
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

    def _of(self, topic: str) -> dict[str, str]:
        attributes = self._attributes.get(topic)
        if attributes is None:
            attributes = self._attributes[topic] = {"group": self._group, "topic": topic}
            # Served at 0 from the first record on, so rate() and alerts see the series before a failure.
            self._retries.add(0, attributes)
        return attributes

    def handled(self, topic: str, seconds: float) -> None:
        """One record of ``topic`` handled (or given up on) in ``seconds``, retries included."""
        self._handle.record(seconds, self._of(topic))

    def retried(self, topic: str) -> None:
        """One failed attempt at a record of ``topic`` that is tried again."""
        self._retries.add(1, self._of(topic))

    def observe_lag(self, consumer: AIOKafkaConsumer, positions: dict[TopicPartition, int]) -> None:
        """Lag from the high watermarks fetch responses carry, so it costs no ListOffsets request."""
        self.set_lags(lags(consumer.assignment(), consumer.highwater, positions.get))

    def set_lags(self, per_topic: dict[str, int]) -> None:
        """Each topic's lag, summed over this member's partitions of it."""
        for topic, lag in per_topic.items():
            self._lag.set(lag, {"group": self._group, "topic": topic})
