"""Avro single-object encoding of events.

Wire format (Avro specification, "Single-object encoding"): ``C3 01`` + the 8-byte little-endian
CRC-64-AVRO fingerprint of the writer schema's canonical form + the Avro binary body. The fingerprint
lets any consumer find the writer's schema among all versions in the repository; the body is then read
through the *current* schema of that event, so old data arrives upgraded (new fields at their defaults).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Mapping
from typing import Any, Final

from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import validate

from .errors import CorruptEventError, EventEncodeError, UnknownEventError, UnknownSchemaError
from .fastcheck import Check, compile_check
from .registry import SchemaRegistry, SchemaVersion, default_registry

MAGIC: Final = b"\xc3\x01"
HEADER_SIZE: Final = len(MAGIC) + 8


def header(sv: SchemaVersion) -> bytes:
    """The 10-byte single-object header for data written with ``sv``."""
    return MAGIC + sv.fingerprint


def encode(
    event_name: str,
    record: Mapping[str, Any],
    *,
    registry: SchemaRegistry | None = None,
    version: int | None = None,
) -> bytes:
    """Encode ``record`` with the current schema of ``event_name`` as a single object.

    ``version`` pins an older schema version instead (a producer that must stay readable by consumers not
    yet upgraded, and tests of old data). Raises ``UnknownEventError`` for an event or version with no
    schema and ``EventEncodeError`` for a record that does not match it (missing or unknown field, wrong
    type, naive ``occurred_at``).
    """
    sv = _writer_for(registry or default_registry(), event_name, version)
    if not isinstance(record, Mapping):
        raise EventEncodeError(event_name, f"record must be a mapping, not {type(record).__name__}")
    # fastavro silently drops keys the schema lacks; a misspelt field would then vanish, so refuse it.
    names = _field_names(sv)
    if not names.issuperset(record):
        unknown = set(record) - names
        raise EventEncodeError(event_name, f"fields not in schema v{sv.version}: {sorted(unknown)}")
    occurred_at = record.get("occurred_at")
    if isinstance(occurred_at, dt.datetime) and occurred_at.utcoffset() is None:
        # A naive time would be read back as UTC-aware and no longer equal what was sent.
        raise EventEncodeError(event_name, "occurred_at must be timezone-aware")
    # Validate first: the writer alone coerces or truncates some wrong values instead of failing.
    try:
        # The boolean pass is the hot path; the raising pass only runs to word the error, because
        # building ValidationError text for every rejected union branch costs more than the write.
        if not _fast_check(sv)(record) and not validate(record, sv.parsed, raise_errors=False):
            validate(record, sv.parsed, raise_errors=True)
    except Exception as exc:  # ValidationError, and TypeErrors from logical-type checks
        raise EventEncodeError(event_name, _short(exc)) from exc
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(sv.fingerprint)
    try:
        schemaless_writer(buf, sv.parsed, record)
    except Exception as exc:  # e.g. a decimal that does not fit its precision
        raise EventEncodeError(event_name, _short(exc)) from exc
    return buf.getvalue()


def writer_schema(data: bytes, *, registry: SchemaRegistry | None = None) -> SchemaVersion:
    """The schema version ``data`` was written with, read from its header only (cheap routing)."""
    if len(data) < HEADER_SIZE:
        raise CorruptEventError(f"{len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    if data[:2] != MAGIC:
        raise CorruptEventError(f"bad magic {bytes(data[:2]).hex()}, expected {MAGIC.hex()}")
    fingerprint = bytes(data[2:HEADER_SIZE])
    sv = (registry or default_registry()).by_fingerprint(fingerprint)
    if sv is None:
        raise UnknownSchemaError(fingerprint)
    return sv


def decode(data: bytes, *, registry: SchemaRegistry | None = None) -> tuple[str, dict[str, Any]]:
    """Decode a single object into ``(event_name, record)`` shaped by the event's current schema.

    Raises ``CorruptEventError`` (bad magic, truncated, trailing or unreadable body) or
    ``UnknownSchemaError`` (fingerprint of no schema in the repository); both are ``EventDecodeError``.
    """
    reg = registry or default_registry()
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CorruptEventError(f"expected bytes, got {type(data).__name__}")
    writer = writer_schema(data, registry=reg)
    reader = reg.current(writer.event_name)
    buf = io.BytesIO(data)
    buf.seek(HEADER_SIZE)
    try:
        if writer is reader:
            record = schemaless_reader(buf, writer.parsed, None)
        else:
            record = schemaless_reader(buf, writer.parsed, reader.parsed)
    except Exception as exc:  # EOFError, struct.error, UnicodeDecodeError, IndexError, ... all mean "corrupt"
        raise CorruptEventError(
            f"{writer.event_name} v{writer.version}: unreadable body: {_short(exc)}"
        ) from exc
    # fastavro reads short without complaint when a length prefix overruns the buffer; a body that does not
    # end exactly at the end of the data was not written by this schema.
    end = buf.tell()
    if end != len(data):
        raise CorruptEventError(
            f"{writer.event_name} v{writer.version}: body ends at byte {end} of {len(data)}"
        )
    if not isinstance(record, dict):
        raise CorruptEventError(f"{writer.event_name}: body did not decode to a record")
    return writer.event_name, record


def _writer_for(registry: SchemaRegistry, event_name: str, version: int | None) -> SchemaVersion:
    if version is None:
        return registry.current(event_name)
    for sv in registry.versions(event_name):
        if sv.version == version:
            return sv
    raise UnknownEventError(f"{event_name} v{version}")


def _field_names(sv: SchemaVersion) -> frozenset[str]:
    names = _FIELD_NAMES.get(sv.fingerprint)
    if names is None:
        names = frozenset(f["name"] for f in sv.raw["fields"])
        _FIELD_NAMES[sv.fingerprint] = names
    return names


_FIELD_NAMES: dict[bytes, frozenset[str]] = {}


def _fast_check(sv: SchemaVersion) -> Check:
    check = _FAST_CHECKS.get(sv.fingerprint)
    if check is None:
        check = _FAST_CHECKS[sv.fingerprint] = compile_check(sv.parsed)
    return check


_FAST_CHECKS: dict[bytes, Check] = {}


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."
