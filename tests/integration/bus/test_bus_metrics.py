"""The consumer's RED metrics as /metrics serves them: records handled (with their time) and retries."""

from __future__ import annotations

import secrets
import urllib.request

from bus_testkit import FAST_CONSUMER, FAST_RETRY, BusTopics, sample_event, wait_until
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from suanli import telemetry
from suanli.bus import ConsumedEvent, EventConsumer, EventPublisher, RetriableError


def _samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset((k, v) for k, v in s.labels.items() if not k.startswith("otel_scope"))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_handled_records_and_retries_are_counted_per_group_and_topic(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    handle = telemetry.setup("bus-metrics-test", metrics_port=0, registry=CollectorRegistry())
    try:
        group = f"g-{secrets.token_hex(3)}"
        await publisher.publish(
            bus_topics.events, "job-1", "JobCancelled", sample_event("JobCancelled", reason="flaky")
        )
        await publisher.publish(
            bus_topics.events, "job-1", "JobCancelled", sample_event("JobCancelled", reason="next")
        )
        attempts: list[str] = []

        async def flaky_twice(event: ConsumedEvent) -> None:
            attempts.append(event.record["reason"])
            if attempts.count("flaky") in (1, 2) and event.record["reason"] == "flaky":
                raise RetriableError("ledger database restarting")

        async with EventConsumer(
            bus_topics.bootstrap,
            group,
            [bus_topics.events],
            flaky_twice,
            settings=FAST_CONSUMER,
            retry=FAST_RETRY,
        ):
            await wait_until(lambda: "next" in attempts, what="the record after the flaky one")

        assert handle.metrics_url is not None
        samples = _samples(handle.metrics_url)
        labels = frozenset({("group", group), ("topic", bus_topics.events)})
        assert samples[("suanli_consumer_retries_total", labels)] == 2.0
        assert samples[("suanli_consumer_handle_seconds_count", labels)] == 2.0  # each record once
        assert samples[("suanli_consumer_handle_seconds_sum", labels)] > 0.0  # the backoffs included
    finally:
        handle.shutdown()
