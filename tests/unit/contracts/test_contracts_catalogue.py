"""The event catalogue in code and the schema files agree, and every event carries the envelope."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from suanli.contracts import (
    ENVELOPE_FIELDS,
    EVENTS,
    TOPICS,
    SchemaRegistry,
    catalogue,
    default_registry,
    lint_registry,
    schemas_dir,
)
from suanli.data import data_path

REPO_ROOT = Path(__file__).resolve().parents[3]


ROOT = data_path("schemas/avro")


def _current_files() -> dict[str, Path]:
    return {p.stem: p for p in ROOT.glob("*/*.avsc") if not re.search(r"\.v\d+$", p.stem)}


def test_schemas_dir_is_the_repository_one_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUANLI_SCHEMAS_DIR", raising=False)
    assert schemas_dir() == ROOT


def test_every_schema_file_is_in_the_catalogue_and_back() -> None:
    files = _current_files()
    assert set(files) == set(EVENTS)
    for name, path in files.items():
        assert path.parent.name == EVENTS[name].context, name


def test_lint_finds_nothing_in_the_repository() -> None:
    assert lint_registry(default_registry()) == []


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_every_version_starts_with_the_envelope(event: str) -> None:
    for sv in default_registry().versions(event):
        head = [(f["name"], f["type"]) for f in sv.raw["fields"][:4]]
        assert head == list(ENVELOPE_FIELDS), sv.path
        assert sv.raw["namespace"] == f"suanli.{sv.context}"


def test_topics_and_keys() -> None:
    # 11 + auth.events (the token ledger) + queues.events + jobs.commands and jobs.replies (upstream)
    # + services.events and services.load (inference services)
    assert len(set(TOPICS)) == len(TOPICS) == 17
    assert catalogue.events_on(catalogue.NETWORK_LINKS) == ("NetworkLinkChanged",)
    for spec in EVENTS.values():
        assert spec.topic in TOPICS
        assert spec.full_name == f"suanli.{spec.context}.{spec.name}"
    assert catalogue.events_on(catalogue.PLACEMENTS) == ("TaskPlaced", "TaskPreempted", "TaskStopRequested")
    assert catalogue.topic_of("NodeSnapshot") == "node.snapshots"
    assert catalogue.context_of("ChargeRecorded") == "billing"
    assert catalogue.events_on(catalogue.AUTH_EVENTS) == (
        "TokenIssued",
        "TokenRevoked",
        "SigningKeyAdded",
        "SigningKeyRetired",
    )
    assert catalogue.events_on(catalogue.QUEUES_EVENTS) == (
        "QueueCreated",
        "QueueUpdated",
        "QueueDeleted",
        "PriorityClassDefined",
        "PriorityClassDeleted",
    )
    assert catalogue.events_on(catalogue.JOBS_COMMANDS) == (
        "JobSubmissionRequested",
        "JobCancellationRequested",
    )
    assert catalogue.events_on(catalogue.JOBS_REPLIES) == ("JobCommandAnswered",)
    assert catalogue.events_on(catalogue.SERVICES_EVENTS)[:3] == (
        "ServiceCreated",
        "ServiceScaled",
        "ServiceDeleted",
    )
    with pytest.raises(KeyError, match="NoSuchEvent"):
        catalogue.spec("NoSuchEvent")


def test_event_names_are_past_tense() -> None:
    # Events state facts that happened (ARCHITECTURE §5); a command-like name is a smell.
    for name in EVENTS:
        assert re.search(r"(ed|Snapshot)$", name), name


def test_at_least_two_events_keep_an_older_version() -> None:
    reg = default_registry()
    evolved = [n for n in reg.event_names() if len(reg.versions(n)) > 1]
    assert {"NodeSnapshot", "TaskFailed"} <= set(evolved)
    for name in evolved:
        numbers = [sv.version for sv in reg.versions(name)]
        assert numbers == sorted(numbers) and reg.versions(name)[-1].is_current


def test_lint_reports_a_file_missing_from_the_catalogue(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ROOT, tmp_path / "avro")
    extra = tmp_path / "avro" / "sensing" / "NodeRegistered.avsc"
    text = extra.read_text().replace('"NodeRegistered"', '"NodeRenamed"')
    (extra.parent / "NodeRenamed.avsc").write_text(text)
    (tmp_path / "avro" / "billing" / "ChargeRecorded.avsc").unlink()
    problems = lint_registry(SchemaRegistry.load(tmp_path / "avro"))
    assert any("NodeRenamed is not in suanli.contracts.catalogue" in p for p in problems)
    assert any("ChargeRecorded has no schema file" in p for p in problems)


def test_docs_table_lists_every_event_with_its_topic() -> None:
    text = (REPO_ROOT / "docs" / "events.md").read_text()
    rows = {
        cells[0].strip("` "): cells
        for line in text.splitlines()
        if line.startswith("| `") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 6
    }
    assert set(rows) == set(EVENTS)
    reg = default_registry()
    for name, spec in EVENTS.items():
        _, context, topic, key, version, _ = rows[name]
        assert (context, topic.strip("`"), key.strip("`")) == (spec.context, spec.topic, spec.key), name
        assert int(version) == reg.current(name).version, name


def test_every_event_topic_is_configured_by_the_bus() -> None:
    # Topic configuration (partitions, cleanup) lives beside the events; an event names no other topic.
    from suanli.bus.topics import BY_NAME

    assert set(TOPICS) <= set(BY_NAME)


def test_the_bus_reads_the_one_topic_catalogue() -> None:
    from suanli.bus import topics

    assert topics.CATALOGUE is catalogue.TOPIC_SPECS
    assert topics.BY_NAME is catalogue.TOPICS_BY_NAME
    assert topics.PLACEMENTS is catalogue.topic_spec(catalogue.PLACEMENTS)
    # Every topic constant of the bus is a catalogue entry under the same name, and each entry has one.
    handles = {name: value for name, value in vars(topics).items() if isinstance(value, catalogue.TopicSpec)}
    assert {name: spec.name for name, spec in handles.items()} == {
        name: getattr(catalogue, name) for name in handles
    }
    assert set(handles.values()) == set(catalogue.TOPIC_SPECS)


def test_topics_carry_catalogued_events_in_catalogue_order() -> None:
    assert tuple(t.name for t in catalogue.TOPIC_SPECS if catalogue.events_on(t.name)) == TOPICS
    with pytest.raises(KeyError, match="placement"):
        catalogue.topic_spec("placement")
