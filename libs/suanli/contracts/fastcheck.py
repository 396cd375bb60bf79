"""A quick yes for records that are certainly valid, compiled once per schema.

fastavro's `validate` walks the schema generically for every record and is the largest single cost of
encoding. This compiles a schema into nested closures that answer "certainly valid" for the common shapes
(plain dicts and lists, the primitive types, enums, unions, timestamps). It is deliberately conservative:
anything it does not fully understand, or any doubt, answers False, and the codec then asks fastavro,
which decides and words the error. So it can only make encoding faster, never more permissive.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


def _never(_: Any) -> bool:
    return False


def _integer(low: int, high: int) -> Check:
    def check(v: Any) -> bool:
        return type(v) is int and low <= v <= high

    return check


_PRIMITIVES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: type(v) is bool,
    "int": _integer(*INT_RANGE),
    "long": _integer(*LONG_RANGE),
    "float": lambda v: type(v) is float or type(v) is int,
    "double": lambda v: type(v) is float or type(v) is int,
    "string": lambda v: type(v) is str,
    "bytes": lambda v: type(v) is bytes,
}


def _timestamp(v: Any) -> bool:
    # An aware datetime, as the envelope requires; plain ints are left to fastavro.
    return type(v) is dt.datetime and v.tzinfo is not None


def compile_check(schema: Any, named: dict[str, Check] | None = None) -> Check:
    """A checker for a fastavro-parsed schema (named types inline at first use, then referenced by name)."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        # A reference to a named type defined earlier; resolved late because records may recurse.
        return lambda v: named.get(schema, _never)(v)
    if isinstance(schema, list):
        branches = [compile_check(s, named) for s in schema]
        return lambda v: any(b(v) for b in branches)
    if not isinstance(schema, Mapping):
        return _never
    logical = schema.get("logicalType")
    kind = schema.get("type")
    if logical is not None:
        timestamp = logical in ("timestamp-millis", "timestamp-micros") and kind == "long"
        return _timestamp if timestamp else _never
    if kind == "record":
        return _record(schema, named)
    if kind == "enum":
        symbols = frozenset(schema["symbols"])
        check: Check = lambda v: type(v) is str and v in symbols  # noqa: E731
        named[schema["name"]] = check
        return check
    if kind == "array":
        item = compile_check(schema["items"], named)
        return lambda v: type(v) is list and all(item(x) for x in v)
    if kind == "map":
        value = compile_check(schema["values"], named)
        return lambda v: type(v) is dict and all(type(k) is str and value(x) for k, x in v.items())
    if isinstance(kind, str | list | Mapping) and kind not in ("fixed", "error"):
        return compile_check(kind, named)
    return _never


def _record(schema: Mapping[str, Any], named: dict[str, Check]) -> Check:
    fields: list[tuple[str, Check, bool]] = []

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return False
        for name, field_check, has_default in fields:
            if name in v:
                if not field_check(v[name]):
                    return False
            elif not has_default:
                return False
        return True

    # Registered before the fields compile, so a field may refer back to this record.
    named[schema["name"]] = check
    for field in schema["fields"]:
        field_check = compile_check(field["type"], named)
        fields.append((field["name"], field_check, "default" in field and _default_ok(field_check, field)))
    return check


def _default_ok(field_check: Check, field: Mapping[str, Any]) -> bool:
    """Whether an absent field is certainly fine: only when its (JSON) default passes the field's own check.

    A bytes or fixed default written as a JSON string does not, and such records go to fastavro.
    """
    try:
        return field_check(field["default"])
    except Exception:  # a reference to a type not compiled yet: leave it to fastavro
        return False
