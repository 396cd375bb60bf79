"""The compatibility gate passes on the repository and provably rejects incompatible changes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suanli.contracts import (
    SchemaRegistry,
    check_compatibility,
    check_pair,
    default_registry,
    format_report,
    sample_records,
)
from suanli.data import data_path

ROOT = data_path("schemas/avro")
Schema = dict[str, Any]


def test_repository_schemas_are_compatible() -> None:
    found = check_compatibility(default_registry())
    assert found == [], format_report(found)


def test_gate_actually_compares_something() -> None:
    reg = default_registry()
    pairs = [(old, reg.current(n)) for n in reg.event_names() for old in reg.versions(n)[:-1]]
    assert len(pairs) >= 2
    for old, _ in pairs:
        samples = sample_records(old)
        assert samples and all(set(s) == {f["name"] for f in old.raw["fields"]} for s in samples)


def _field(schema: Schema, dotted: str) -> tuple[list[Schema], int]:
    """(fields list, index) of a dotted path like 'devices[].power_w' in a raw schema."""
    fields: list[Schema] = schema["fields"]
    parts = dotted.split(".")
    for part in parts[:-1]:
        name = part.removesuffix("[]")
        f = next(f for f in fields if f["name"] == name)
        t = f["type"]
        if part.endswith("[]"):
            t = t["items"]
        fields = t["fields"]
    index = next(i for i, f in enumerate(fields) if f["name"] == parts[-1])
    return fields, index


def _mutated(tmp_path: Path, file: str, mutate: Callable[[Schema], None]) -> SchemaRegistry:
    root = tmp_path / "avro"
    shutil.copytree(ROOT, root)
    path = root / file
    raw = json.loads(path.read_text())
    mutate(raw)
    path.write_text(json.dumps(raw, indent=2))
    return SchemaRegistry.load(root)


def add_required_field(raw: Schema) -> None:
    raw["fields"].append({"name": "gpu_driver", "type": "string"})


def drop_required_field(raw: Schema) -> None:
    fields, i = _field(raw, "sequence")
    del fields[i]


def change_nested_type(raw: Schema) -> None:
    fields, i = _field(raw, "host.cpu_cores")
    fields[i]["type"] = "string"


def narrow_type(raw: Schema) -> None:
    fields, i = _field(raw, "sequence")
    fields[i]["type"] = "int"  # long -> int would overflow: not a promotion


def add_nested_field_without_default(raw: Schema) -> None:
    fields, _ = _field(raw, "devices[].power_w")
    fields.append({"name": "fan_pct", "type": "double"})


def change_logical_type(raw: Schema) -> None:
    fields, i = _field(raw, "occurred_at")
    fields[i]["type"] = {"type": "long", "logicalType": "timestamp-micros"}


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (add_required_field, "gpu_driver", "added without a default"),
        (drop_required_field, "sequence", "removed, but had no default"),
        (change_nested_type, "host.cpu_cores", "type changed from int to string"),
        (narrow_type, "sequence", "type changed from long to int"),
        (add_nested_field_without_default, "devices[].fan_pct", "added without a default"),
        (change_logical_type, "occurred_at", "logical type changed"),
    ],
)
def test_gate_rejects_incompatible_changes_precisely(
    tmp_path: Path, mutate: Callable[[Schema], None], field: str, fragment: str
) -> None:
    found = check_compatibility(_mutated(tmp_path, "sensing/NodeSnapshot.avsc", mutate))
    assert found, "the gate let an incompatible change through"
    assert {(i.event, i.writer_version, i.reader_version) for i in found} == {("NodeSnapshot", 1, 2)}
    hit = [i for i in found if i.field == field]
    assert hit and fragment in hit[0].message, format_report(found)
    text = str(hit[0])
    assert text.startswith("NodeSnapshot: v2 cannot read v1 data") and f"field '{field}'" in text


def test_gate_accepts_compatible_evolution(tmp_path: Path) -> None:
    def evolve(raw: Schema) -> None:
        raw["fields"].append({"name": "gpu_driver", "type": ["null", "string"], "default": None})
        fields, i = _field(raw, "host.cpu_cores")
        fields[i]["type"] = "long"  # int -> long is an Avro promotion
        fields, i = _field(raw, "report_interval_ms")
        del fields[i]  # had a default in v1, so readers of v1 still cope

    assert check_compatibility(_mutated(tmp_path, "sensing/NodeSnapshot.avsc", evolve)) == []


def test_gate_rejects_removed_enum_symbol_without_default(tmp_path: Path) -> None:
    def drop_symbol(raw: Schema) -> None:
        # Make the enum lose a symbol and its default in a new v3, keeping today's schema as v2.
        fields, i = _field(raw, "kind")
        enum = fields[i]["type"]
        enum["symbols"] = [s for s in enum["symbols"] if s != "OOM"]
        del enum["default"]
        raw["suanli.version"] = 3

    root = tmp_path / "avro"
    shutil.copytree(ROOT, root)
    shutil.copy(root / "execution" / "TaskFailed.avsc", root / "execution" / "TaskFailed.v2.avsc")
    reg = _mutated_in_place(root / "execution" / "TaskFailed.avsc", drop_symbol)
    found = check_compatibility(reg)
    assert [(i.writer_version, i.field) for i in found] == [(2, "kind")], format_report(found)
    assert "['OOM']" in found[0].message


def test_gate_checks_every_older_version(tmp_path: Path) -> None:
    # A v3 adding a required field is unreadable for data of both v1 and v2.
    def add_v3(raw: Schema) -> None:
        raw["suanli.version"] = 3
        raw["fields"].append({"name": "node_pool", "type": "string"})

    root = tmp_path / "avro"
    shutil.copytree(ROOT, root)
    shutil.copy(root / "execution" / "TaskFailed.avsc", root / "execution" / "TaskFailed.v2.avsc")
    found = check_compatibility(_mutated_in_place(root / "execution" / "TaskFailed.avsc", add_v3))
    assert sorted((i.event, i.writer_version, i.field) for i in found) == [
        ("TaskFailed", 1, "node_pool"),
        ("TaskFailed", 2, "node_pool"),
    ]


def test_dynamic_check_confirms_defaults_are_applied() -> None:
    reg = default_registry()
    for name in ("NodeSnapshot", "TaskFailed"):
        old, new = reg.versions(name)
        assert check_pair(old, new) == []


def _mutated_in_place(path: Path, mutate: Callable[[Schema], None]) -> SchemaRegistry:
    raw = json.loads(path.read_text())
    mutate(raw)
    path.write_text(json.dumps(raw, indent=2))
    return SchemaRegistry.load(path.parent.parent)
