"""The compatibility gate: every current schema must read data written with each of its older versions.

Two independent checks, because each catches what the other can miss:

* static rules of Avro schema resolution — a reader field absent from the writer needs a default, a
  type may only change by an Avro promotion, writer enum symbols and union branches must resolve — plus
  our own stricter rules: a field may be removed only if the older version gave it a default (so
  consumers still on that version keep working), and logical types (timestamp precision, decimal scale)
  never change, because the bytes would still resolve while their meaning silently would not;
* dynamic: deterministic sample records covering every field and every union branch and enum symbol are
  written with the older schema and read through the current one with fastavro.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import expand_schema

from .registry import SchemaRegistry, SchemaVersion

# Avro specification, "Schema Resolution": writer type -> reader types it may be read as.
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
_NAMED = frozenset({"record", "enum", "fixed"})
_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason an older version's data cannot be read through the current schema."""

    event: str
    writer_version: int  # the older version whose data cannot be read
    reader_version: int  # the current version
    field: str  # dotted path: "devices[].power_w", "labels{}"; "" for the record itself
    message: str

    def __str__(self) -> str:
        where = f" field '{self.field}'" if self.field else ""
        head = f"{self.event}: v{self.reader_version} cannot read v{self.writer_version} data"
        return f"{head}:{where}: {self.message}"


def check_compatibility(registry: SchemaRegistry) -> list[Incompatibility]:
    """Every way a current schema fails to read one of its event's older versions; empty means compatible."""
    found: list[Incompatibility] = []
    for name in registry.event_names():
        versions = registry.versions(name)
        current = versions[-1]
        for old in versions[:-1]:
            found.extend(check_pair(old, current))
    return found


def check_pair(writer: SchemaVersion, reader: SchemaVersion) -> list[Incompatibility]:
    """Static and dynamic checks of ``reader`` reading data written with ``writer``."""
    problems: list[tuple[str, str]] = []
    _check(expand_schema(dict(writer.raw)), expand_schema(dict(reader.raw)), "", problems)
    if not problems:
        # Only worth running where the rules pass: it confirms them against fastavro's actual resolver.
        problems.extend(_dynamic(writer, reader))
    seen: set[tuple[str, str]] = set()
    out = []
    for path, message in problems:
        if (path, message) not in seen:
            seen.add((path, message))
            out.append(Incompatibility(reader.event_name, writer.version, reader.version, path, message))
    return out


# --- static rules --------------------------------------------------------------------------------------


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"])
    return str(schema)


def _logical(schema: Any) -> tuple[Any, ...] | None:
    if isinstance(schema, dict) and "logicalType" in schema:
        lt = schema["logicalType"]
        if lt == "decimal":
            return (lt, schema.get("scale", 0))
        return (lt,)
    return None


def _short_name(schema: dict[str, Any]) -> str:
    return str(schema["name"]).rsplit(".", 1)[-1]


def _names_match(writer: dict[str, Any], reader: dict[str, Any]) -> bool:
    aliases = {str(a).rsplit(".", 1)[-1] for a in reader.get("aliases", ())}
    return _short_name(writer) == _short_name(reader) or _short_name(writer) in aliases


def _same_kind(writer: Any, reader: Any) -> bool:
    wk, rk = _kind(writer), _kind(reader)
    if wk != rk:
        return False
    return wk not in _NAMED or _names_match(writer, reader)


def _union_match(writer: Any, branches: list[Any]) -> Any | None:
    """The reader branch the spec picks for a writer type: first exact match, else first promotion."""
    for branch in branches:
        if _same_kind(writer, branch):
            return branch
    for branch in branches:
        if _kind(branch) in PROMOTIONS.get(_kind(writer), ()):
            return branch
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check(writer: Any, reader: Any, path: str, problems: list[tuple[str, str]]) -> None:
    if isinstance(reader, list) or isinstance(writer, list):
        _check_union(writer, reader, path, problems)
        return
    changed = _type_change(writer, reader)
    if changed is not None:
        problems.append((path, changed))
        return
    _check_contents(_kind(writer), writer, reader, path, problems)


def _check_union(writer: Any, reader: Any, path: str, problems: list[tuple[str, str]]) -> None:
    if not isinstance(reader, list):
        # Each writer branch is resolved against the reader type on its own; any may occur in data.
        for branch in writer:
            _check(branch, reader, path, problems)
        return
    for branch in writer if isinstance(writer, list) else [writer]:
        target = _union_match(branch, reader)
        if target is None:
            problems.append(
                (
                    path,
                    f"writer type {_describe(branch)} matches no branch of reader union "
                    f"{[_describe(b) for b in reader]}",
                )
            )
        else:
            _check(branch, target, path, problems)


def _type_change(writer: Any, reader: Any) -> str | None:
    """Why ``reader`` cannot read ``writer``'s values at all, or None when the types resolve."""
    wk, rk = _kind(writer), _kind(reader)
    if wk != rk and rk not in PROMOTIONS.get(wk, ()):
        return f"type changed from {_describe(writer)} to {_describe(reader)}, which is not an Avro promotion"
    if _logical(writer) != _logical(reader):
        return f"logical type changed from {_describe(writer)} to {_describe(reader)}"
    if wk in _NAMED and not _names_match(writer, reader):
        return f"{wk} renamed from {writer['name']} to {reader['name']} without an alias"
    return None


def _check_contents(kind: str, writer: Any, reader: Any, path: str, problems: list[tuple[str, str]]) -> None:
    if kind == "record":
        _check_record(writer, reader, path, problems)
    elif kind == "enum":
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            problems.append((path, f"enum symbols {missing} removed and the reader enum has no default"))
    elif kind == "fixed":
        if writer["size"] != reader["size"]:
            problems.append((path, f"fixed size changed from {writer['size']} to {reader['size']}"))
    elif kind == "array":
        _check(writer["items"], reader["items"], path + "[]", problems)
    elif kind == "map":
        _check(writer["values"], reader["values"], path + "{}", problems)


def _check_record(
    writer: dict[str, Any], reader: dict[str, Any], path: str, problems: list[tuple[str, str]]
) -> None:
    writer_fields = {f["name"]: f for f in writer["fields"]}
    matched: set[str] = set()
    for rf in reader["fields"]:
        fpath = _join(path, rf["name"])
        candidates = [rf["name"], *rf.get("aliases", ())]
        wf = next((writer_fields[n] for n in candidates if n in writer_fields), None)
        if wf is None:
            if "default" not in rf:
                problems.append((fpath, "added without a default"))
            continue
        matched.add(wf["name"])
        _check(wf["type"], rf["type"], fpath, problems)
    for name, wf in writer_fields.items():
        if name not in matched and "default" not in wf:
            problems.append(
                (
                    _join(path, name),
                    "removed, but had no default in the older version (its consumers cannot read new data)",
                )
            )


def _describe(schema: Any) -> str:
    kind = _kind(schema)
    if kind == "union":
        return "[" + ", ".join(_describe(b) for b in schema) + "]"
    if kind in _NAMED:
        return f"{kind} {_short_name(schema)}"
    logical = _logical(schema)
    if logical:
        return f"{kind}/{':'.join(str(x) for x in logical)}"
    return kind


# --- dynamic check ---------------------------------------------------------------------------------------


def _dynamic(writer: SchemaVersion, reader: SchemaVersion) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    reader_defaults = {
        f["name"]: f["default"]
        for f in reader.raw["fields"]
        if "default" in f and f["name"] not in {wf["name"] for wf in writer.raw["fields"]}
    }
    for i, sample in enumerate(sample_records(writer.raw)):
        buf = io.BytesIO()
        try:
            schemaless_writer(buf, writer.parsed, sample)
            buf.seek(0)
            got = schemaless_reader(buf, writer.parsed, reader.parsed)
        except Exception as exc:  # any fastavro failure here is the incompatibility we look for
            problems.append(("", f"sample {i} failed to resolve: {type(exc).__name__}: {exc}"))
            continue
        if not isinstance(got, dict):
            problems.append(("", f"sample {i} did not read back as a record"))
            continue
        for name, default in reader_defaults.items():
            if _plain_json(default) and got.get(name) != default:
                message = f"sample {i} read {got.get(name)!r}, expected the default {default!r}"
                problems.append((name, message))
    return problems


def _plain_json(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str | list | dict)


def sample_records(schema: Mapping[str, Any] | SchemaVersion) -> list[dict[str, Any]]:
    """Deterministic records covering every field of ``schema``, every union branch and enum symbol.

    Record ``k`` takes branch ``k mod n`` of each union and symbol ``k mod n`` of each enum, and arrays and
    maps hold two elements built with ``k`` and ``k+1``; so enough records are made for the widest union or
    enum, and at least two (the null and the non-null side of every optional field).
    """
    raw = schema.raw if isinstance(schema, SchemaVersion) else schema
    expanded = expand_schema(dict(raw))
    count = max(2, _widest(expanded))
    return [_sample(expanded, k, str(raw.get("name", ""))) for k in range(count)]


def _widest(schema: Any) -> int:
    kind = _kind(schema)
    if kind == "union":
        return max([len(schema), *(_widest(b) for b in schema)])
    if kind == "record":
        return max([1, *(_widest(f["type"]) for f in schema["fields"])])
    if kind == "enum":
        return len(schema["symbols"])
    if kind == "array":
        return _widest(schema["items"])
    if kind == "map":
        return _widest(schema["values"])
    return 1


def _sample(schema: Any, k: int, path: str) -> Any:
    kind = _kind(schema)
    if kind == "union":
        return _sample(schema[k % len(schema)], k, path)
    logical = _logical(schema)
    if logical is not None:
        value = _sample_logical(schema, logical[0], k)
        if value is not _UNSAMPLED:
            return value
    primitive = _PRIMITIVE_SAMPLES.get(kind)
    if primitive is not None:
        return primitive(k, path)
    return _sample_complex(schema, kind, k, path)


# A logical type without a sample of its own is sampled as its underlying type.
_UNSAMPLED = object()


def _sample_logical(schema: Any, logical_type: str, k: int) -> Any:
    if logical_type in (
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    ):
        value = _EPOCH + dt.timedelta(days=k, milliseconds=1001 * (k + 1))
        return value.replace(tzinfo=None) if logical_type.startswith("local-") else value
    if logical_type == "date":
        return _EPOCH.date() + dt.timedelta(days=k)
    if logical_type in ("time-millis", "time-micros"):
        return dt.time(12, k % 60, 30, 1000 * k)
    if logical_type == "decimal":
        scale = int(schema.get("scale", 0))
        return decimal.Decimal(1234 + k).scaleb(-scale)
    if logical_type == "uuid":
        return str(uuid.UUID(int=k + 1))
    return _UNSAMPLED


_PRIMITIVE_SAMPLES: dict[str, Callable[[int, str], Any]] = {
    "null": lambda k, path: None,
    "boolean": lambda k, path: k % 2 == 1,
    "int": lambda k, path: 7 + k,
    "long": lambda k, path: 7 + k,
    # Exactly representable, so equality survives a float32 round trip.
    "float": lambda k, path: 0.5 + k,
    "double": lambda k, path: 0.5 + k,
    "string": lambda k, path: f"{path}-{k}",
    "bytes": lambda k, path: f"{path}-{k}".encode(),
}


def _sample_complex(schema: Any, kind: str, k: int, path: str) -> Any:
    if kind == "fixed":
        return bytes((k + i) % 256 for i in range(schema["size"]))
    if kind == "enum":
        return schema["symbols"][k % len(schema["symbols"])]
    if kind == "array":
        return [_sample(schema["items"], k, path + "[]"), _sample(schema["items"], k + 1, path + "[]")]
    if kind == "map":
        return {f"key{j}": _sample(schema["values"], k + j, path + "{}") for j in range(2)}
    if kind == "record":
        return {f["name"]: _sample(f["type"], k, _join(path, f["name"])) for f in schema["fields"]}
    raise ValueError(f"cannot sample Avro type {kind!r} at {path or '<root>'}")


def format_report(incompatibilities: Iterable[Incompatibility]) -> str:
    """One line per incompatibility, for a CI log."""
    return "\n".join(str(i) for i in incompatibilities)


__all__ = [
    "PROMOTIONS",
    "Incompatibility",
    "check_compatibility",
    "check_pair",
    "format_report",
    "sample_records",
]
