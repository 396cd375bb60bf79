"""JSON for domain cores' frozen dataclasses.

Metering's table values (changelogs) and task facts, the scheduler's projection snapshots.

JSON rather than pickle because a changelog is a topic anyone with write access can append to, and a
snapshot a table: loading either must never execute code. Types are read from the dataclasses' own
annotations, so the cores stay free of serialisation code and a new field needs no change here. Datetimes
travel as ISO 8601 text, with their offset.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


class StateDecodeError(ValueError):
    """A table value or task fact that is not what its type says (a changelog anyone can append to)."""

    reason = "undecodable-state"


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, tuple | list):
        return [_plain(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    return obj


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _build_union(tp, data)
    if origin is tuple:
        return _build_tuple(typing.get_args(tp), data)
    if origin in (dict, Mapping, types.MappingProxyType):
        value = {k: _build(typing.get_args(tp)[1], v) for k, v in data.items()}
        return types.MappingProxyType(value) if origin is types.MappingProxyType else value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, data)
    return _build_scalar(tp, data)


def _build_union(tp: Any, data: Any) -> Any:
    args = typing.get_args(tp)
    if data is None and type(None) in args:
        return None
    last: Exception | None = None
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _build(arg, data)
        except (TypeError, ValueError, KeyError) as exc:
            last = exc
    raise StateDecodeError(f"{data!r} matches no branch of {tp}") from last


def _build_tuple(args: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_build(args[0], v) for v in data)
    return tuple(_build(a, v) for a, v in zip(args, data, strict=True))


def _build_dataclass(tp: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise StateDecodeError(f"{tp.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(tp)
    known = {f.name for f in dataclasses.fields(tp)}
    return tp(**{k: _build(hints[k], v) for k, v in data.items() if k in known})


def _build_scalar(tp: Any, data: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if tp in (int, str, bool) and type(data) is tp:
        return data
    if tp is datetime and isinstance(data, str):
        return datetime.fromisoformat(data)
    if tp is Any:
        return data
    raise StateDecodeError(f"expected {tp}, got {data!r}")


def dumps(obj: Any) -> bytes:
    """``obj`` (dataclasses, enums, datetimes, tuples, mappings, scalars) as compact JSON."""
    return json.dumps(_plain(obj), separators=(",", ":"), sort_keys=True).encode()


def loads(cls: type[T], data: bytes | str) -> T:
    """A ``cls`` from ``dumps``'s JSON, checked against its annotations; `StateDecodeError` if not one."""
    try:
        return typing.cast(T, _build(cls, json.loads(data)))
    except StateDecodeError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise StateDecodeError(f"{cls.__name__}: {exc}") from exc


class TaggedCodec:
    """One of several dataclasses on one topic, tagged by class name."""

    def __init__(self, *classes: type) -> None:
        self._by_name = {c.__name__: c for c in classes}

    def dumps(self, obj: Any) -> bytes:
        """``obj``, one of the classes, tagged with its class name."""
        name = type(obj).__name__
        if name not in self._by_name:
            raise TypeError(f"{name} is not one of {sorted(self._by_name)}")
        return json.dumps({"type": name, "data": _plain(obj)}, separators=(",", ":")).encode()

    def loads(self, data: bytes | str) -> Any:
        """The object a tagged document holds; `StateDecodeError` if it is not one of the classes."""
        try:
            doc = json.loads(data)
            cls = self._by_name[doc["type"]]
            return _build(cls, doc["data"])
        except StateDecodeError:
            raise
        except (TypeError, ValueError, KeyError) as exc:
            raise StateDecodeError(f"not a tagged fact: {exc}") from exc


def shape_digest(cls: type) -> str:
    """A short digest of what ``cls`` holds: its fields' names and types, through nested types.

    Nested dataclasses and enums (their values) count. Data written under one digest reads back under the
    same one only, so a reader whose types changed (a field added, renamed, retyped) knows the data is not
    its own.
    """
    return hashlib.sha256(_shape(cls, set()).encode()).hexdigest()[:16]


def _shape(tp: Any, seen: set[type]) -> str:
    args = typing.get_args(tp)
    if args:
        inner = ",".join(_shape(a, seen) for a in args)
        return f"{getattr(typing.get_origin(tp), '__name__', repr(typing.get_origin(tp)))}[{inner}]"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp in seen:
            return tp.__qualname__
        seen.add(tp)
        hints = _hints(tp)
        fields = ";".join(f"{f.name}:{_shape(hints[f.name], seen)}" for f in dataclasses.fields(tp))
        return f"{tp.__qualname__}{{{fields}}}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return f"{tp.__qualname__}({','.join(str(m.value) for m in tp)})"
    return getattr(tp, "__qualname__", repr(tp))
