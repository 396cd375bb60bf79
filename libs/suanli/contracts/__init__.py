"""Event contracts: Avro schemas under ``schemas/avro``, the single-object codec, the compatibility gate.

    from suanli.contracts import encode, decode, new_envelope
    data = encode("TaskFinished", {**new_envelope("sensing/n1", task_id, event_id=ids(), occurred_at=clock()),
                                   "task_id": task_id, ...})
    name, record = decode(data)   # record shaped by the current schema, whatever version wrote it

Records are plain dicts. Decoding errors are ``EventDecodeError`` (``UnknownSchemaError``,
``CorruptEventError``) with a ``reason`` code for dead-letter headers. ``catalogue`` is the one list of
topics (`TopicSpec`) and events (`EventSpec`).
"""

from __future__ import annotations

from . import catalogue
from .catalogue import (
    ENVELOPE_FIELDS,
    EVENTS,
    TOPIC_SPECS,
    TOPICS,
    EventSpec,
    TopicSpec,
    context_of,
    events_on,
    topic_of,
    topic_spec,
)
from .codec import HEADER_SIZE, MAGIC, decode, encode, header, writer_schema
from .compat import Incompatibility, check_compatibility, check_pair, format_report, sample_records
from .envelope import new_envelope
from .errors import (
    CatalogueError,
    ContractError,
    CorruptEventError,
    EventDecodeError,
    EventEncodeError,
    UnknownEventError,
    UnknownSchemaError,
)
from .lint import lint_registry
from .registry import (
    SCHEMAS_DIR_ENV,
    SchemaRegistry,
    SchemaVersion,
    crc64_avro,
    default_registry,
    schema_fingerprint,
    schemas_dir,
)

__all__ = [
    "ENVELOPE_FIELDS",
    "EVENTS",
    "HEADER_SIZE",
    "MAGIC",
    "SCHEMAS_DIR_ENV",
    "TOPICS",
    "TOPIC_SPECS",
    "CatalogueError",
    "ContractError",
    "CorruptEventError",
    "EventDecodeError",
    "EventEncodeError",
    "EventSpec",
    "Incompatibility",
    "SchemaRegistry",
    "SchemaVersion",
    "TopicSpec",
    "UnknownEventError",
    "UnknownSchemaError",
    "catalogue",
    "check_compatibility",
    "check_pair",
    "context_of",
    "crc64_avro",
    "decode",
    "default_registry",
    "encode",
    "events_on",
    "format_report",
    "header",
    "lint_registry",
    "new_envelope",
    "sample_records",
    "schema_fingerprint",
    "schemas_dir",
    "topic_of",
    "topic_spec",
    "writer_schema",
]
