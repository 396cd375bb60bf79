"""Single-object encoding: round trips, old data upgraded on read, fingerprints, typed errors."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import shutil
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastavro import schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from suanli.contracts import (
    EVENTS,
    HEADER_SIZE,
    MAGIC,
    CatalogueError,
    CorruptEventError,
    EventDecodeError,
    EventEncodeError,
    SchemaRegistry,
    UnknownEventError,
    UnknownSchemaError,
    crc64_avro,
    decode,
    default_registry,
    encode,
    header,
    new_envelope,
    sample_records,
    schema_fingerprint,
    writer_schema,
)
from suanli.data import data_path

ROOT = data_path("schemas/avro")
T0 = dt.datetime(2025, 3, 1, 8, 30, 15, 123000, tzinfo=dt.UTC)


def env(subject: str, n: int = 1) -> dict[str, Any]:
    return new_envelope("test/producer", subject, event_id=str(uuid.UUID(int=n)), occurred_at=T0)


# --- fingerprints ----------------------------------------------------------------------------------------


def test_crc64_avro_matches_the_specification_test_vector() -> None:
    # Avro's share/test/data/schema-tests.txt: the 64-bit Rabin fingerprint of "null" is 7195948357588979594.
    canonical = to_parsing_canonical_form("null")
    assert canonical == '"null"'
    assert crc64_avro(canonical.encode()) == 7195948357588979594 == 0x63DD24E7CC258F8A
    # Single-object encoding writes it little-endian, which is also how fastavro renders it in hex.
    assert schema_fingerprint(canonical) == bytes.fromhex("8a8f25cce724dd63")
    assert schema_fingerprint(canonical).hex() == fingerprint(canonical, "CRC-64-AVRO")


def test_every_schema_fingerprint_agrees_with_fastavro() -> None:
    for sv in default_registry():
        assert sv.canonical_form == to_parsing_canonical_form(parse_schema(json.loads(sv.path.read_text())))
        assert sv.fingerprint.hex() == fingerprint(sv.canonical_form, "CRC-64-AVRO"), sv.path


def test_header_is_magic_plus_little_endian_fingerprint() -> None:
    data = encode("JobCancelled", {**env("j1"), "job_id": "j1", "reason": "user", "requested_by": "alice"})
    sv = default_registry().current("JobCancelled")
    assert data[:2] == b"\xc3\x01" == MAGIC
    assert data[2:HEADER_SIZE] == crc64_avro(sv.canonical_form.encode()).to_bytes(8, "little")
    assert data[:HEADER_SIZE] == header(sv)
    assert writer_schema(data) is sv


# --- round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_every_event_round_trips_its_generated_samples(event: str) -> None:
    samples = sample_records(default_registry().current(event))
    assert len(samples) >= 2  # both sides of every optional field
    for record in samples:
        name, got = decode(encode(event, record))
        assert (name, got) == (event, record)


REPRESENTATIVE: dict[str, dict[str, Any]] = {
    "NodeSnapshot": {
        **env("node-17"),
        "node_id": "node-17",
        "region": "cn-east",
        "zone": "cn-east-1a",
        "site": "sh-dc2",
        "labels": {"pool": "training", "rack": "r12"},
        "sequence": 4711,
        "report_interval_ms": 5000,
        "host": {
            "cpu_cores": 128,
            "cpu_utilisation_pct": 37.5,
            "memory_total_mib": 2_063_000,
            "memory_used_mib": 512_000,
        },
        "devices": [
            {
                "index": 0,
                "uuid": "GPU-8f2c",
                "model": "NVIDIA H200",
                "memory_total_mib": 143_771,
                "memory_used_mib": 80_000,
                "utilisation_pct": 93.0,
                "temperature_c": 61.0,
                "power_w": 612.5,
                "mig_instances": None,
            },
            {
                "index": 1,
                "uuid": "GPU-11aa",
                "model": "NVIDIA H200",
                "memory_total_mib": 143_771,
                "memory_used_mib": 0,
                "utilisation_pct": 0.0,
                "temperature_c": 33.0,
                "power_w": None,
                "mig_instances": [
                    {
                        "gpu_instance_id": 1,
                        "compute_instance_id": 0,
                        "uuid": "MIG-1",
                        "profile": "1g.18gb",
                        "memory_total_mib": 16_384,
                    }
                ],
            },
        ],
        "task_ids": ["job-1/t0", "job-2/t3"],
    },
    "ChargeRecorded": {
        **env("tenant-a"),
        "charge_id": "ch-1",
        "tenant": "tenant-a",
        "debit_account": "tenant-a:usage",
        "credit_account": "suanli:revenue",
        "amount": Decimal("1234567.891234"),
        "currency": "CNY",
        "quantity": Decimal("3600.5"),
        "unit": "cu-second",
        "unit_price": Decimal("0.000012345"),
        "usage_event_id": str(uuid.UUID(int=9)),
        "job_id": "job-1",
        "task_id": None,
    },
    "TaskPlaced": {
        **env("node-17"),
        "job_id": "job-1",
        "task_id": "job-1/t0",
        "node_id": "node-17",
        "region": "cn-east",
        "site": "sh-dc2",
        "devices": [{"index": 0, "milli": 500}, {"index": 3, "milli": 500}],
        "requests": {
            "cpu_milli": 8000,
            "memory_mib": 65536,
            "gpu_count": 2,
            "gpu_milli": 500,
            "gpu_memory_mib": 40960,
            "gpu_model": "NVIDIA H200",
        },
        "attempt": 2,
        "cycle": 991,
        "command": ["python", "train.py"],
        "env": {"NCCL_DEBUG": "WARN"},
        "duration_s": 2.5,
        "queue": "acme/vision",
        "tenant": "acme",
        "best_effort": False,
        "rtt_ms": 12.5,
        "price_per_hour": 0.4375,
    },
}


@pytest.mark.parametrize("event", sorted(REPRESENTATIVE))
def test_representative_records_round_trip_exactly(event: str) -> None:
    record = REPRESENTATIVE[event]
    assert decode(encode(event, record)) == (event, record)


def test_money_stays_exact_decimal() -> None:
    _, got = decode(encode("ChargeRecorded", REPRESENTATIVE["ChargeRecorded"]))
    assert isinstance(got["amount"], Decimal)
    assert got["amount"] + Decimal("0.000001") == Decimal("1234567.891235")


# --- old versions read through the current schema --------------------------------------------------------


def test_node_snapshot_v1_data_is_read_with_the_new_defaults() -> None:
    record = REPRESENTATIVE["NodeSnapshot"]
    old = {k: v for k, v in record.items() if k not in ("task_ids", "labels")}
    old["devices"] = [{k: v for k, v in d.items() if k != "power_w"} for d in record["devices"]]
    data = encode("NodeSnapshot", old, version=1)
    assert writer_schema(data).version == 1
    name, got = decode(data)
    assert name == "NodeSnapshot"
    assert got["task_ids"] == [] and got["labels"] == {}
    assert [d["power_w"] for d in got["devices"]] == [None, None]
    upgraded = [{**d, "power_w": None} for d in old["devices"]]
    assert got == {**old, "labels": {}, "task_ids": [], "devices": upgraded}


def test_task_failed_v1_data_gets_the_enum_default() -> None:
    old = {**env("t1"), "task_id": "t1", "job_id": "j1", "node_id": "n1", "attempt": 1, "reason": "segfault"}
    _, got = decode(encode("TaskFailed", old, version=1))
    assert got == {**old, "kind": "UNKNOWN", "exit_code": None}


def test_encoding_an_unknown_version_is_refused() -> None:
    with pytest.raises(UnknownEventError, match="TaskFailed v9"):
        encode("TaskFailed", {}, version=9)


# --- decode errors ---------------------------------------------------------------------------------------


def _valid() -> bytes:
    return encode("NodeSnapshot", REPRESENTATIVE["NodeSnapshot"])


def test_wrong_magic_is_corrupt() -> None:
    data = _valid()
    with pytest.raises(CorruptEventError, match="bad magic"):
        decode(b"\xc3\x02" + data[2:])
    with pytest.raises(CorruptEventError):
        decode(b'{"json": true, "not": "avro"}')


def test_unknown_fingerprint_is_its_own_error() -> None:
    data = _valid()
    forged = MAGIC + b"\x00" * 8 + data[HEADER_SIZE:]
    with pytest.raises(UnknownSchemaError) as info:
        decode(forged)
    assert info.value.fingerprint == b"\x00" * 8
    assert isinstance(info.value, EventDecodeError) and info.value.reason == "unknown-schema"


def test_every_truncation_is_corrupt() -> None:
    data = _valid()
    for n in range(len(data)):
        with pytest.raises(CorruptEventError):
            decode(data[:n])


def test_trailing_bytes_are_corrupt() -> None:
    with pytest.raises(CorruptEventError, match="ends at byte"):
        decode(_valid() + b"\x00")


def test_random_corruption_raises_only_typed_errors() -> None:
    rnd = random.Random(20250301)
    data = _valid()
    for _ in range(2000):
        flipped = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            flipped[rnd.randrange(HEADER_SIZE, len(flipped))] = rnd.randrange(256)
        try:
            name, record = decode(bytes(flipped))
        except EventDecodeError as exc:
            assert type(exc) is CorruptEventError
        else:  # some flips land in a value and still decode: then the shape must be intact
            assert name == "NodeSnapshot" and set(record) == set(REPRESENTATIVE["NodeSnapshot"])


def test_non_bytes_input_is_corrupt() -> None:
    with pytest.raises(CorruptEventError):
        decode("c301")  # type: ignore[arg-type]


def test_a_body_of_another_schema_is_corrupt_not_a_crash() -> None:
    sv = default_registry().current("NodeSnapshot")
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema({"type": "string"}), "x" * 40)
    with pytest.raises(CorruptEventError):
        decode(header(sv) + buf.getvalue())


# --- encode errors ---------------------------------------------------------------------------------------


def test_encode_rejects_unknown_event() -> None:
    with pytest.raises(UnknownEventError, match="NodeExploded"):
        encode("NodeExploded", {})


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"sequence": "4711"}, "sequence"),
        ({"sequence": 1.5}, "sequence"),  # fastavro's writer alone would truncate it silently
        ({"nickname": "x"}, "nickname"),
        ({"occurred_at": T0.replace(tzinfo=None)}, "timezone-aware"),
    ],
)
def test_encode_rejects_bad_records(change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(EventEncodeError, match=fragment):
        encode("NodeSnapshot", {**REPRESENTATIVE["NodeSnapshot"], **change})


def test_encode_rejects_a_missing_required_field() -> None:
    record = dict(REPRESENTATIVE["NodeSnapshot"])
    del record["host"]
    with pytest.raises(EventEncodeError, match="NodeSnapshot"):
        encode("NodeSnapshot", record)


def test_encode_rejects_float_money() -> None:
    with pytest.raises(EventEncodeError):
        encode("ChargeRecorded", {**REPRESENTATIVE["ChargeRecorded"], "amount": 12.5})


# --- envelope --------------------------------------------------------------------------------------------


def test_new_envelope_is_pure_and_normalised() -> None:
    at = dt.datetime(2025, 3, 1, 16, 30, 15, 123456, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    a = new_envelope("svc", "s1", event_id=uuid.UUID(int=5), occurred_at=at)
    b = new_envelope("svc", "s1", event_id=str(uuid.UUID(int=5)).upper(), occurred_at=at)
    assert (
        a
        == b
        == {
            "event_id": "00000000-0000-0000-0000-000000000005",
            "occurred_at": dt.datetime(2025, 3, 1, 8, 30, 15, 123000, tzinfo=dt.UTC),
            "producer": "svc",
            "subject_id": "s1",
        }
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"event_id": "not-a-uuid", "occurred_at": T0},
        {"event_id": str(uuid.UUID(int=1)), "occurred_at": T0.replace(tzinfo=None)},
    ],
)
def test_new_envelope_refuses_bad_input(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        new_envelope("svc", "s1", **kwargs)


# --- loading the registry --------------------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "avro"
    shutil.copytree(ROOT, root)
    return root


def test_schemas_dir_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(tmp_path)
    (root / "billing" / "ChargeRecorded.avsc").unlink()
    monkeypatch.setenv("SUANLI_SCHEMAS_DIR", str(root))
    reg = default_registry()
    assert reg.root == root.resolve() and "ChargeRecorded" not in reg
    with pytest.raises(UnknownEventError):
        encode("ChargeRecorded", {})


def _rewrite(path: Path, **changes: Any) -> None:
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("file", "changes", "fragment"),
    [
        ("sensing/NodeSnapshot.avsc", {"name": "Snapshot"}, "does not match the file name"),
        ("sensing/NodeSnapshot.avsc", {"namespace": "suanli.metering"}, "namespace must be"),
        ("sensing/NodeSnapshot.v1.avsc", {"suanli.version": 3}, "file says v1"),
        ("sensing/NodeSnapshot.avsc", {"suanli.version": 1}, "highest, unique version"),
        ("sensing/NodeSnapshot.avsc", {"fields": [{"name": "x", "type": "nope"}]}, "invalid Avro schema"),
    ],
)
def test_a_broken_schema_directory_is_refused(
    tmp_path: Path, file: str, changes: dict[str, Any], fragment: str
) -> None:
    root = _copy(tmp_path)
    _rewrite(root / file, **changes)
    with pytest.raises(CatalogueError, match=fragment):
        SchemaRegistry.load(root)


def test_two_versions_with_one_canonical_form_are_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    src = root / "execution" / "TaskFinished.avsc"
    old = src.with_name("TaskFinished.v1.avsc")
    shutil.copy(src, old)
    _rewrite(src, **{"suanli.version": 2, "doc": "only the doc changed"})
    with pytest.raises(CatalogueError, match="same canonical form"):
        SchemaRegistry.load(root)
