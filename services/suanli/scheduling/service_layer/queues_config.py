"""Queue configuration: tenants and teams as a queue tree, quotas per flavour, cohorts, priority classes.

Read from YAML (see deploy/scheduler/queues.yaml); every mistake names its path, e.g.
`queues[2].quotas["gpu:A100"].guaranteed: must be an integer >= 0`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, QueueTree, ResourceQuota


class QueueConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class QueueConfig:
    queues: tuple[QueueSpec, ...]
    priority_classes: tuple[PriorityClass, ...] = ()


def parse_queue_config(text: str, *, complete: bool = True) -> QueueConfig:
    """`complete`: the file holds the whole tree (the scheduler's seed), so every parent must be in it;
    False for a file of queues to add to a tree recorded elsewhere (`suanli queue create -f`)."""
    data = yaml.safe_load(text) or {}
    if not isinstance(data, Mapping):
        raise QueueConfigError("the queue file must be a mapping with 'queues' and 'priority_classes'")
    unknown = sorted(set(data) - {"queues", "priority_classes"})
    if unknown:
        raise QueueConfigError(f"unknown key(s) {unknown}; allowed: queues, priority_classes")
    classes = data.get("priority_classes") or {}
    if not isinstance(classes, Mapping):
        raise QueueConfigError("priority_classes: must map a class name to an integer")
    priority_classes = []
    for name, value in classes.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise QueueConfigError(f"priority_classes.{name}: must be an integer, got {value!r}")
        priority_classes.append(PriorityClass(str(name), value))
    raw_queues = data.get("queues") or []
    if not isinstance(raw_queues, list):
        raise QueueConfigError("queues: must be a list")
    queues = tuple(parse_queue(entry, f"queues[{i}]") for i, entry in enumerate(raw_queues))
    try:
        if complete:
            QueueTree(queues)
        elif len({q.name for q in queues}) != len(queues):
            raise ValueError("duplicate queue name")
    except ValueError as exc:
        raise QueueConfigError(f"queues: {exc}") from None
    return QueueConfig(queues, tuple(priority_classes))


def parse_queue(entry: Any, path: str) -> QueueSpec:
    """One entry of the queue file (`path` names it in errors); its parent is not checked here."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise QueueConfigError(f"{path}: must be a mapping with a 'name'")
    extra = sorted(set(entry) - {"name", "cohort", "stopped", "quotas"})
    if extra:
        raise QueueConfigError(f"{path}: unknown key(s) {extra}")
    quotas_raw = entry.get("quotas") or {}
    if not isinstance(quotas_raw, Mapping):
        raise QueueConfigError(f"{path}.quotas: must map a flavour to its quota")
    quotas = []
    for flavour, q in quotas_raw.items():
        qpath = f'{path}.quotas["{flavour}"]'
        if isinstance(q, int) and not isinstance(q, bool):
            q = {"guaranteed": q}
        if not isinstance(q, Mapping):
            raise QueueConfigError(f"{qpath}: must be an integer or a mapping")
        extra = sorted(set(q) - {"guaranteed", "maximum", "borrowing_limit", "lending_limit"})
        if extra:
            raise QueueConfigError(f"{qpath}: unknown key(s) {extra}")
        for key, value in q.items():
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise QueueConfigError(f"{qpath}.{key}: must be an integer >= 0, got {value!r}")
        try:
            quotas.append(
                ResourceQuota(
                    str(flavour),
                    int(q.get("guaranteed", 0)),
                    q.get("maximum"),
                    q.get("borrowing_limit"),
                    q.get("lending_limit"),
                )
            )
        except ValueError as exc:
            raise QueueConfigError(f"{qpath}: {exc}") from None
    try:
        return QueueSpec(entry["name"], tuple(quotas), entry.get("cohort"), bool(entry.get("stopped", False)))
    except ValueError as exc:
        raise QueueConfigError(f"{path}: {exc}") from None


def queue_record(spec: QueueSpec) -> dict[str, Any]:
    """The body of an internal QueueConfigured event (JSON in the event store)."""
    return {
        "name": spec.name,
        "cohort": spec.cohort,
        "stopped": spec.stopped,
        "quotas": [
            {
                "resource": q.resource,
                "guaranteed": q.guaranteed,
                "maximum": q.maximum,
                "borrowing_limit": q.borrowing_limit,
                "lending_limit": q.lending_limit,
            }
            for q in spec.quotas
        ],
    }


def queue_from_record(record: Mapping[str, Any]) -> QueueSpec:
    return QueueSpec(
        record["name"],
        tuple(
            ResourceQuota(
                q["resource"], q["guaranteed"], q["maximum"], q["borrowing_limit"], q["lending_limit"]
            )
            for q in record["quotas"]
        ),
        record.get("cohort"),
        bool(record.get("stopped", False)),
    )
