"""JSON for domain cores' frozen dataclasses.

Metering's table values (changelogs) and task facts, the scheduler's projection snapshots.

JSON rather than pickle because a changelog is a topic anyone with write access can append to, and a
snapshot a table: loading either must never execute code. Types are read from the dataclasses' own
annotations, so the cores stay free of serialisation code and a new field needs no change here. Datetimes
travel as ISO 8601 text, with their offset.

The annotations are read once per type: each type gets a decoder built from them (and each value type an
encoder) on first use, so a large state (a scheduler snapshot of tens of thousands of jobs) costs what its
values cost, not a type-hint resolution per value (docs/BENCHMARKS.md, "The snapshot codec, compiled").
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import threading
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


class StateDecodeError(ValueError):
    """A table value or task fact that is not what its type says (a changelog anyone can append to)."""

    reason = "undecodable-state"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plainer(*, omit_defaults: bool) -> Callable[[Any], Any]:
    """A function turning values into JSON-ready ones.

    What to do with a value is decided once per type (for a dataclass: its field names and defaults)
    instead of looking its fields up for every instance; the per-type encoders call the function itself,
    not a method, as it runs for every value.
    """
    by_type: dict[type, Callable[[Any], Any]] = {}

    def plain(obj: Any) -> Any:
        kind = type(obj)
        if kind in _SCALARS:
            return obj
        encode = by_type.get(kind)
        if encode is None:
            encode = by_type[kind] = encoder(kind)
        return encode(obj)

    def encoder(kind: type) -> Callable[[Any], Any]:
        if dataclasses.is_dataclass(kind):
            return dataclass_encoder(kind)
        if issubclass(kind, enum.Enum):
            return lambda obj: obj.value
        if issubclass(kind, datetime):
            return datetime.isoformat
        if issubclass(kind, tuple | list):
            return lambda obj: [plain(v) for v in obj]
        if issubclass(kind, Mapping):
            return lambda obj: {str(k): plain(v) for k, v in obj.items()}
        return lambda obj: obj

    def dataclass_encoder(kind: type) -> Callable[[Any], Any]:
        fields = dataclasses.fields(kind)
        if not omit_defaults:
            names = tuple(f.name for f in fields)
            return lambda obj: {name: plain(getattr(obj, name)) for name in names}
        # Only plain defaults: a default_factory need not give the same value twice. The type must
        # match too (0 == 0.0 == False), and the test is inline: it runs for every field of every value.
        defaults = tuple((f.name, f.default) for f in fields)
        return lambda obj: {
            name: plain(value)
            for name, default in defaults
            if (value := getattr(obj, name)) is not default
            and (type(value) is not type(default) or value != default)
        }

    return plain


_plain = _plainer(omit_defaults=False)
_lean = _plainer(omit_defaults=True)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


Decoder = Callable[[Any], Any]
# One decoder per type, built once from the annotations (resolving them per value was most of a
# snapshot's decoding time), then shared by every thread.
_DECODERS: dict[Any, Decoder] = {}
_COMPILING = threading.Lock()


def _decoder(tp: Any) -> Decoder:
    found = _DECODERS.get(tp)
    if found is None:
        with _COMPILING:
            compiler = _Compiler()
            found = compiler.decoder(tp)
            _DECODERS.update(compiler.built)
    return found


class _Compiler:
    """Builds the decoders of a type and of the types it holds, published together when complete.

    A dataclass's decoder exists before its fields' (a type may refer to itself) but is unusable until
    they are built, so no other thread may see it in between.
    """

    def __init__(self) -> None:
        self.built: dict[Any, Decoder] = {}

    def decoder(self, tp: Any) -> Decoder:
        found = self._find(tp)
        if found is None:
            found = self._dataclass(tp) if _is_dataclass_type(tp) else self._compile(tp)
            self.built[tp] = found
        return found

    def _find(self, tp: Any) -> Decoder | None:
        return _DECODERS.get(tp) or self.built.get(tp)

    def _compile(self, tp: Any) -> Decoder:
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return _union_decoder(tp, [self.decoder(a) for a in typing.get_args(tp) if a is not type(None)])
        if origin is tuple:
            args = typing.get_args(tp)
            if len(args) == 2 and args[1] is Ellipsis:
                return _variadic_decoder(self.decoder(args[0]))
            return _fixed_decoder(tuple(self.decoder(a) for a in args))
        if origin in (dict, Mapping, types.MappingProxyType):
            frozen = origin is types.MappingProxyType
            return _mapping_decoder(self.decoder(typing.get_args(tp)[1]), frozen=frozen)
        return _scalar_decoder(tp)

    def _dataclass(self, tp: type) -> Decoder:
        fields: dict[str, Decoder] = {}

        def decode(data: Any) -> Any:
            if type(data) is not dict:
                raise StateDecodeError(f"{tp.__name__}: expected an object, got {type(data).__name__}")
            return tp(**{k: fields[k](v) for k, v in data.items() if k in fields})

        self.built[tp] = decode
        hints = _hints(tp)
        fields.update({f.name: self.decoder(hints[f.name]) for f in dataclasses.fields(tp)})
        return decode


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _union_decoder(tp: Any, branches: list[Decoder]) -> Decoder:
    optional = type(None) in typing.get_args(tp)

    def decode(data: Any) -> Any:
        if data is None and optional:
            return None
        last: Exception | None = None
        for branch in branches:
            try:
                return branch(data)
            except (TypeError, ValueError, KeyError) as exc:
                last = exc
        raise StateDecodeError(f"{data!r} matches no branch of {tp}") from last

    return decode


def _not_an_array(data: Any) -> StateDecodeError:
    return StateDecodeError(f"expected an array, got {type(data).__name__}")


def _variadic_decoder(item: Decoder) -> Decoder:
    def decode(data: Any) -> tuple[Any, ...]:
        if type(data) is not list:
            raise _not_an_array(data)
        return tuple(map(item, data))

    return decode


def _fixed_decoder(items: tuple[Decoder, ...]) -> Decoder:
    def decode(data: Any) -> tuple[Any, ...]:
        if type(data) is not list:
            raise _not_an_array(data)
        return tuple([d(v) for d, v in zip(items, data, strict=True)])

    return decode


def _mapping_decoder(value: Decoder, *, frozen: bool) -> Decoder:
    def decode(data: Any) -> Any:
        if type(data) is not dict:
            raise StateDecodeError(f"expected an object, got {type(data).__name__}")
        built = {k: value(v) for k, v in data.items()}
        return types.MappingProxyType(built) if frozen else built

    return decode


def _scalar_decoder(tp: Any) -> Decoder:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_decoder(tp)
    if tp is float:
        return _float
    if tp in (int, str, bool):
        return _exactly(tp)
    if tp is datetime:
        return _datetime
    if tp is Any:
        return lambda data: data

    def unknown(data: Any) -> Any:
        raise StateDecodeError(f"expected {tp}, got {data!r}")

    return unknown


def _enum_decoder(tp: type[enum.Enum]) -> Decoder:
    # The members by value, looked up directly: calling the enum goes through its metaclass each time.
    members = {m.value: m for m in tp}

    def decode(data: Any) -> Any:
        try:
            return members[data]
        except (KeyError, TypeError):
            return tp(data)  # what the enum itself says (its _missing_, or a ValueError)

    return decode


def _exactly(tp: type) -> Decoder:
    def decode(data: Any) -> Any:
        if type(data) is not tp:
            raise StateDecodeError(f"expected {tp}, got {data!r}")
        return data

    return decode


def _float(data: Any) -> float:
    if type(data) is float:
        return data
    if type(data) is int:
        return float(data)
    raise StateDecodeError(f"expected {float}, got {data!r}")


def _datetime(data: Any) -> datetime:
    if type(data) is not str:
        raise StateDecodeError(f"expected {datetime}, got {data!r}")
    return datetime.fromisoformat(data)


def dumps(obj: Any, *, omit_defaults: bool = False) -> bytes:
    """``obj`` (dataclasses, enums, datetimes, tuples, mappings, scalars) as compact JSON.

    With ``omit_defaults``, a dataclass field that holds its default is left out (`loads` gives it its
    default back): a large state of mostly-default fields is smaller and faster to read, and reads the
    same with a reader that predates the option.
    """
    plain = _lean if omit_defaults else _plain
    return json.dumps(plain(obj), separators=(",", ":"), sort_keys=True).encode()


def loads(cls: type[T], data: bytes | str) -> T:
    """A ``cls`` from ``dumps``'s JSON, checked against its annotations; `StateDecodeError` if not one."""
    try:
        return typing.cast(T, _decoder(cls)(json.loads(data)))
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
            return _decoder(cls)(doc["data"])
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
