"""The topic catalogue: names, partitions, policies, DLQ and prefix rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.bus import topics
from suanli.bus.topics import CleanupPolicy, TopicSpec, dlq_topic, resolve_prefix, topic_name
from suanli.contracts import EVENTS
from suanli.contracts import TOPICS as CONTRACT_TOPICS

REQUIRED = {
    "node.snapshots",
    "links.measured",
    "tasks.lifecycle",
    "usage.samples",
    "capacity.nodes",
    "network.links",
    "nodes.status",
    "usage.metered",
    "jobs.events",
    "jobs.commands",
    "jobs.replies",
    "placements",
    "queues.events",
    "billing.events",
    "auth.events",
    "services.events",
    "services.load",
}
COMPACTED = {"capacity.nodes", "network.links", "nodes.status"}


def test_catalogue_holds_every_topic_once() -> None:
    names = [t.name for t in topics.CATALOGUE]
    assert len(names) == len(set(names))
    assert set(names) == REQUIRED


def test_views_are_compacted_and_kept_forever_others_expire() -> None:
    for spec in topics.CATALOGUE:
        if spec.name in COMPACTED:
            assert spec.cleanup_policy is CleanupPolicy.COMPACT
            assert spec.configs == {"cleanup.policy": "compact", "retention.ms": "-1"}
        else:
            assert spec.cleanup_policy is CleanupPolicy.DELETE
            assert spec.retention_ms > 0
            assert spec.configs["cleanup.policy"] == "delete"


def test_every_contract_topic_is_in_the_bus_catalogue() -> None:
    assert set(CONTRACT_TOPICS) <= set(topics.BY_NAME)
    assert {e.topic for e in EVENTS.values()} <= set(topics.BY_NAME)


def test_placements_are_keyed_by_node() -> None:
    assert topics.PLACEMENTS.key == "node id"
    assert topics.spec("placements") is topics.PLACEMENTS


def test_unknown_topic_names_fail_loudly() -> None:
    with pytest.raises(KeyError, match="placement"):
        topics.spec("placement")


def test_dead_letter_topics_follow_the_name_and_keep_one_partition() -> None:
    spec = topics.JOBS_EVENTS
    assert spec.dlq == "jobs.events.dlq" == dlq_topic("jobs.events")
    dead = spec.dlq_spec()
    assert (dead.name, dead.partitions, dead.cleanup_policy) == ("jobs.events.dlq", 1, CleanupPolicy.DELETE)
    assert dead.retention_ms > spec.retention_ms


def test_prefix_namespaces_names_and_dead_letters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(topics.TOPIC_PREFIX_ENV, raising=False)
    assert topic_name("placements") == "placements"
    assert topic_name("placements", "staging") == "staging.placements"
    prefixed = topics.PLACEMENTS.prefixed("staging")
    assert (prefixed.name, prefixed.dlq) == ("staging.placements", "staging.placements.dlq")
    assert prefixed.partitions == topics.PLACEMENTS.partitions
    monkeypatch.setenv(topics.TOPIC_PREFIX_ENV, "ci-42")
    assert resolve_prefix() == "ci-42"
    assert topic_name("placements") == "ci-42.placements"
    assert resolve_prefix("") == "", "an explicit empty prefix overrides the environment"


def test_topic_names_are_valid_kafka_names() -> None:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    for spec in topics.CATALOGUE:
        for name in (spec.name, spec.dlq):
            assert set(name) <= allowed and len(name) <= 249


def test_specs_are_immutable() -> None:
    with pytest.raises(AttributeError):
        topics.PLACEMENTS.partitions = 1  # type: ignore[misc]
    assert TopicSpec("x", 1, "k").cleanup_policy is CleanupPolicy.DELETE


def test_the_docs_table_matches_the_catalogue() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "bus.md").read_text(encoding="utf-8")
    rows = {
        cells[0]: cells
        for line in text.split("## Topic catalogue", 1)[1].splitlines()
        if line.startswith("| ") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 6
    }
    rows.pop("topic")
    assert set(rows) == {t.name for t in topics.CATALOGUE}
    for spec in topics.CATALOGUE:
        _, partitions, _, cleanup, retention, _ = rows[spec.name]
        assert (int(partitions), cleanup) == (spec.partitions, spec.cleanup_policy.value), spec.name
        days = f"{spec.retention_ms // topics.DAY_MS} d"
        assert retention == ("forever" if spec.retention_ms == topics.FOREVER_MS else days), spec.name
