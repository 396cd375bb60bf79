"""Pydantic's validation errors as one line per problem: `tasks[0].resources.gpu.milli: must be ...`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class JobSpecError(ValueError):
    """A spec that cannot be submitted; `problems` holds one `path: message` line per fault."""

    def __init__(self, problems: Sequence[str], source: str = "") -> None:
        self.problems = tuple(problems)
        self.source = source
        super().__init__("\n".join(self.problems))


def field_path(loc: Sequence[int | str]) -> str:
    """A pydantic error location as the user wrote it: `tasks[0].resources.gpu`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "spec"


def _got(error: ErrorDetails) -> str:
    return f" (got {error['input']!r})"


_TYPE_MESSAGES: dict[str, str] = {
    "missing": "required",
    "extra_forbidden": "unknown field",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
}
_WITHOUT_INPUT = {"missing", "extra_forbidden"}


def describe(error: ErrorDetails) -> str:
    """The message of one pydantic error, in the spec's own words."""
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    if kind == "jobspec":
        return str(ctx["reason"])
    if kind == "literal_error":
        return f"must be one of {ctx['expected'].replace(' or ', ', ')}{_got(error)}"
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind] + ("" if kind in _WITHOUT_INPUT else _got(error))
    return str(error["msg"])


def problems_of(exc: ValidationError) -> list[str]:
    """One `path: message` line per problem of a validation error."""
    return [f"{field_path(e['loc'])}: {describe(e)}" for e in exc.errors()]
