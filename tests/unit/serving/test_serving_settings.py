"""Serving's consumer settings: the fetch wait operators set reaches every consumer serving builds."""

from __future__ import annotations

from suanli.serving.entrypoints.settings import ServingSettings

REQUIRED = {"SUANLI_KAFKA_BOOTSTRAP": "kafka:9092", "SUANLI_PG_DSN": "postgresql://pg/suanli"}


def test_the_consumers_wait_a_second_per_fetch_by_default() -> None:
    consumer = ServingSettings.load(REQUIRED).consumer
    # Longer than the bus's 250 ms: replicas start and report load over seconds, and a parked fetch
    # costs the embedded broker CPU in proportion to the batches it reads.
    assert (consumer.fetch_max_wait_ms, consumer.session_timeout_ms, consumer.heartbeat_interval_ms) == (
        1_000,
        10_000,
        1_000,
    )


def test_the_fetch_wait_is_read_from_its_variable() -> None:
    settings = ServingSettings.load(
        {**REQUIRED, "SUANLI_SERVING_FETCH_WAIT_MS": "200", "SUANLI_SERVING_SESSION_TIMEOUT_MS": "6000"}
    )
    assert (settings.consumer.fetch_max_wait_ms, settings.consumer.session_timeout_ms) == (200, 6000)
