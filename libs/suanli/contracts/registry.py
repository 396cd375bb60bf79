"""The repository's Avro schemas, loaded as a catalogue of versions indexed by name and fingerprint.

Layout: ``<root>/<context>/<Event>.avsc`` is the current version; ``<Event>.v<N>.avsc`` are older versions,
kept so that data written by any past producer still resolves (ARCHITECTURE §2.3). Each file records its
number as the custom property ``"suanli.version"``; custom properties are not part of the canonical form,
so they never change a fingerprint.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import to_parsing_canonical_form

from suanli.data import DATA_DIR_ENV, data_path

from .errors import CatalogueError, UnknownEventError

VERSION_PROPERTY = "suanli.version"
SCHEMAS_DIR_ENV = "SUANLI_SCHEMAS_DIR"

_FILE_RE = re.compile(r"^(?P<name>[A-Z][A-Za-z0-9]*)(?:\.v(?P<version>[1-9][0-9]*))?\.avsc$")

# CRC-64-AVRO (Rabin) as the Avro specification defines it: the empty polynomial fingerprint and a table
# built from it. Implemented here rather than trusted from a library so a test can pin it to the spec.
_EMPTY64 = 0xC15D213AA4D7A795


def _make_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY64 & -(fp & 1))
        table.append(fp)
    return tuple(table)


_TABLE = _make_table()


def crc64_avro(data: bytes) -> int:
    """The 64-bit Rabin fingerprint (CRC-64-AVRO) of ``data``, as an unsigned integer."""
    fp = _EMPTY64
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


def schema_fingerprint(canonical_form: str) -> bytes:
    """The 8 bytes that follow the single-object marker: CRC-64-AVRO of the canonical form, little-endian."""
    return crc64_avro(canonical_form.encode("utf-8")).to_bytes(8, "little")


@dataclass(frozen=True, eq=False)
class SchemaVersion:
    """One schema file: an event at one version."""

    event_name: str
    context: str
    version: int
    is_current: bool
    path: Path
    raw: Mapping[str, Any]  # the JSON as written (docs, defaults and logical types included)
    parsed: Any = field(repr=False)  # fastavro's parsed form, what the reader and writer take
    canonical_form: str = field(repr=False)
    fingerprint: bytes = field(repr=False)

    @property
    def full_name(self) -> str:
        """The Avro full name (``suanli.<context>.<Event>``)."""
        return f"suanli.{self.context}.{self.event_name}"


class SchemaRegistry:
    """All versions of all events found under one schema directory.

    Immutable after ``load``; safe to share between threads and tasks.
    """

    def __init__(self, root: Path, versions: list[SchemaVersion]) -> None:
        self.root = root
        by_event: dict[str, list[SchemaVersion]] = {}
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        for sv in versions:
            clash = self._by_fingerprint.get(sv.fingerprint)
            if clash is not None:
                # Two files with one canonical form would make the writer ambiguous (and a version that
                # changes only docs or logical types is no new wire version).
                raise CatalogueError(
                    f"{sv.path} and {clash.path} have the same canonical form "
                    f"(fingerprint {sv.fingerprint.hex()})"
                )
            self._by_fingerprint[sv.fingerprint] = sv
            by_event.setdefault(sv.event_name, []).append(sv)
        self._versions: dict[str, tuple[SchemaVersion, ...]] = {}
        self._current: dict[str, SchemaVersion] = {}
        for name, svs in by_event.items():
            contexts = {sv.context for sv in svs}
            if len(contexts) > 1:
                raise CatalogueError(f"event {name} is defined in several contexts: {sorted(contexts)}")
            svs.sort(key=lambda sv: sv.version)
            current = [sv for sv in svs if sv.is_current]
            if len(current) != 1:
                raise CatalogueError(f"event {name} has no current (unsuffixed) schema file")
            if current[0] is not svs[-1] or len({sv.version for sv in svs}) != len(svs):
                raise CatalogueError(
                    f"event {name}: the current file must carry the highest, unique version; "
                    f"found {[(sv.path.name, sv.version) for sv in svs]}"
                )
            self._versions[name] = tuple(svs)
            self._current[name] = current[0]

    @classmethod
    def load(cls, root: Path | str | None = None) -> SchemaRegistry:
        """Load every ``*.avsc`` under ``root`` (default: ``schemas_dir()``); raise ``CatalogueError``."""
        base = Path(root) if root is not None else schemas_dir()
        if not base.is_dir():
            raise CatalogueError(f"schema directory {base} does not exist")
        versions = [_load_file(path, base) for path in sorted(base.glob("*/*.avsc"))]
        stray = sorted(p for p in base.rglob("*.avsc") if p.parent.parent != base)
        if stray:
            raise CatalogueError(f"schema files outside <root>/<context>/: {[str(p) for p in stray]}")
        return cls(base, versions)

    # --- queries -----------------------------------------------------------------------------------
    def event_names(self) -> tuple[str, ...]:
        """Names of every event with a schema, sorted."""
        return tuple(sorted(self._current))

    def __contains__(self, event_name: object) -> bool:
        return event_name in self._current

    def __iter__(self) -> Iterator[SchemaVersion]:
        """Every version of every event, events sorted by name, versions ascending."""
        for name in self.event_names():
            yield from self._versions[name]

    def __len__(self) -> int:
        return len(self._by_fingerprint)

    def current(self, event_name: str) -> SchemaVersion:
        """The current (highest) version of ``event_name``; `UnknownEventError` when there is none."""
        try:
            return self._current[event_name]
        except KeyError:
            raise UnknownEventError(event_name) from None

    def versions(self, event_name: str) -> tuple[SchemaVersion, ...]:
        """All versions of ``event_name``, oldest first; the last one is current."""
        try:
            return self._versions[event_name]
        except KeyError:
            raise UnknownEventError(event_name) from None

    def by_fingerprint(self, fingerprint: bytes) -> SchemaVersion | None:
        """The version whose writer-schema fingerprint is ``fingerprint``, or None."""
        return self._by_fingerprint.get(bytes(fingerprint))


def schemas_dir() -> Path:
    """``$SUANLI_SCHEMAS_DIR`` if set, else ``<repo>/schemas/avro``."""
    override = os.environ.get(SCHEMAS_DIR_ENV)
    return Path(override) if override else data_path("schemas/avro")


@functools.lru_cache(maxsize=8)
def _load_cached(root: Path) -> SchemaRegistry:
    return SchemaRegistry.load(root.resolve())


@functools.lru_cache(maxsize=8)
def _configured(schemas_setting: str | None, data_setting: str | None) -> SchemaRegistry:
    return _load_cached(schemas_dir())


def default_registry() -> SchemaRegistry:
    """The registry of ``schemas_dir()``, loaded once per directory.

    Keyed by the settings that name the directory, not by its path: this runs for every event encoded or
    decoded without an explicit registry, and building the path (or resolving it) cost the scheduler 4 %
    of its CPU under bench/latency.py's load.
    """
    return _configured(os.environ.get(SCHEMAS_DIR_ENV), os.environ.get(DATA_DIR_ENV))


def _load_file(path: Path, root: Path) -> SchemaVersion:
    m = _FILE_RE.match(path.name)
    if m is None:
        raise CatalogueError(f"{path}: expected <EventName>.avsc or <EventName>.v<N>.avsc")
    name, suffix_version = m["name"], m["version"]
    context = path.parent.name
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CatalogueError(f"{path}: not readable JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("type") != "record":
        raise CatalogueError(f"{path}: an event schema must be a record")
    if raw.get("name") != name:
        raise CatalogueError(f"{path}: record name {raw.get('name')!r} does not match the file name {name!r}")
    if raw.get("namespace") != f"suanli.{context}":
        raise CatalogueError(f"{path}: namespace must be 'suanli.{context}', not {raw.get('namespace')!r}")
    version = raw.get(VERSION_PROPERTY)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CatalogueError(f"{path}: missing or bad {VERSION_PROPERTY!r} (a positive integer)")
    if suffix_version is not None and int(suffix_version) != version:
        raise CatalogueError(f"{path}: file says v{suffix_version} but {VERSION_PROPERTY} is {version}")
    try:
        parsed = parse_schema(raw)
        canonical = to_parsing_canonical_form(parsed)
    except Exception as exc:  # fastavro raises several unrelated types for a bad schema
        raise CatalogueError(f"{path}: invalid Avro schema: {exc}") from exc
    return SchemaVersion(
        event_name=name,
        context=context,
        version=version,
        is_current=suffix_version is None,
        path=path,
        raw=raw,
        parsed=parsed,
        canonical_form=canonical,
        fingerprint=schema_fingerprint(canonical),
    )
