"""Checks that schema files and the event catalogue in code agree, and that every event has the envelope."""

from __future__ import annotations

from typing import Any

from .catalogue import ENVELOPE_FIELDS, EVENTS
from .registry import SchemaRegistry


def lint_registry(registry: SchemaRegistry) -> list[str]:
    """Problems found, one sentence each; empty when files and catalogue match."""
    problems: list[str] = []
    names = set(registry.event_names())
    for name in sorted(names - set(EVENTS)):
        problems.append(f"{registry.current(name).path}: event {name} is not in suanli.contracts.catalogue")
    for name in sorted(set(EVENTS) - names):
        problems.append(f"catalogue event {name} has no schema file under {registry.root}")
    for sv in registry:
        spec = EVENTS.get(sv.event_name)
        if spec is not None and spec.context != sv.context:
            problems.append(f"{sv.path}: catalogue puts {sv.event_name} in context {spec.context!r}")
        fields: list[dict[str, Any]] = list(sv.raw["fields"])
        head = [(f["name"], f["type"]) for f in fields[: len(ENVELOPE_FIELDS)]]
        if head != list(ENVELOPE_FIELDS):
            problems.append(
                f"{sv.path}: must start with the envelope {[n for n, _ in ENVELOPE_FIELDS]} "
                f"(with their types), found {[n for n, _ in head]}"
            )
        if sv.is_current and spec is not None and spec.key not in {f["name"] for f in fields}:
            problems.append(f"{sv.path}: catalogue key field {spec.key!r} is not in the schema")
    return problems
