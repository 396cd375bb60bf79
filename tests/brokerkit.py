"""A broker of the test's own, to restart empty (the session's broker is shared), and records to put on it.

A plain module (the tests folders are not packages): its fixture is registered by tests/conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from suanli.bus import EventPublisher
from suanli.contracts import EVENTS, default_registry, sample_records
from suanli.infra.broker import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(log_path=tmp_path / "tansu.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def publish_samples(bootstrap: str, topic: str, event_name: str, count: int, tag: str) -> list[str]:
    """``count`` valid ``event_name`` records on ``topic`` (task ids ``<tag>-<i>``, keyed as the
    catalogue says); their event ids."""
    sample = sample_records(default_registry().current(event_name))[0]
    key = EVENTS[event_name].key
    records = [{**sample, "event_id": str(uuid.uuid4()), "task_id": f"{tag}-{i}"} for i in range(count)]
    async with EventPublisher(bootstrap) as publisher:
        for record in records:
            await publisher.publish(topic, str(record[key]), event_name, record)
    return [r["event_id"] for r in records]
