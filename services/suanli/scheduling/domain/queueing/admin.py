"""Queue administration rules: what a create, update or delete of a queue (or a priority class) may do to
the queue set, decided on the set as recorded. Pure: the service layer passes in the queues, the priority
classes and how many live jobs each queue or class has, and records the change the rule allows.

Refusals are the kernel's request kinds, their messages naming the request field (`queue.name: ...`), so
the API answers them with the right status without translating: a tree that would not validate is
INVALID_ARGUMENT, an existing name ALREADY_EXISTS, a missing one NOT_FOUND, and a delete that would leave
jobs or child queues without their queue FAILED_PRECONDITION.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from suanli.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from suanli.scheduling.domain.queueing.queues import QueueSpec, QueueTree
from suanli.scheduling.domain.queueing.state import PriorityClass


@dataclass(frozen=True, slots=True)
class LiveJobs:
    """Jobs that still need their queue: waiting for admission, or holding room on nodes."""

    pending: int = 0
    running: int = 0

    @property
    def any(self) -> bool:
        return self.pending + self.running > 0


def _validated(queues: Mapping[str, QueueSpec], changed: QueueSpec | None, removed: str | None) -> None:
    specs = {name: spec for name, spec in queues.items() if name != removed}
    if changed is not None:
        specs[changed.name] = changed
    try:
        QueueTree(tuple(specs.values()))
    except ValueError as exc:
        raise InvalidArgument(f"queue.name: {exc}") from None


def check_create(queues: Mapping[str, QueueSpec], spec: QueueSpec) -> None:
    """A new queue: its name is free and its parent (the path above it) exists."""
    if spec.name in queues:
        raise AlreadyExists(f"queue {spec.name!r} already exists; change it with UpdateQueue")
    if spec.parent is not None and spec.parent not in queues:
        raise InvalidArgument(f"queue.name: parent queue {spec.parent!r} does not exist; create it first")
    _validated(queues, spec, None)


def check_update(queues: Mapping[str, QueueSpec], spec: QueueSpec) -> bool:
    """A replaced spec for an existing queue; False when it equals the recorded one (nothing to record)."""
    current = queues.get(spec.name)
    if current is None:
        raise NotFound(f"queue {spec.name!r} not found")
    if current == spec:
        return False
    _validated(queues, spec, None)
    return True


def check_delete(queues: Mapping[str, QueueSpec], name: str, live: LiveJobs) -> None:
    """Only a leaf without live jobs: a job must never be left pointing at a queue that is gone."""
    if name not in queues:
        raise NotFound(f"queue {name!r} not found")
    prefix = name + "/"
    children = sorted(other for other in queues if other.startswith(prefix))
    if children:
        raise FailedPrecondition(
            f"queue {name!r} has child queue(s) {', '.join(children)}; delete them first"
        )
    if live.any:
        raise FailedPrecondition(
            f"queue {name!r} has {live.pending} pending and {live.running} running job(s); "
            "cancel them or wait for them to finish"
        )
    _validated(queues, None, name)


def check_delete_class(classes: tuple[PriorityClass, ...], name: str, live: LiveJobs) -> None:
    """A class no live job names: the cycle would find those jobs' class unknown and never admit them."""
    if all(c.name != name for c in classes):
        raise NotFound(f"priority class {name!r} not found")
    if live.any:
        raise FailedPrecondition(
            f"priority class {name!r} is named by {live.pending} pending and {live.running} running "
            "job(s); wait for them to finish"
        )


def with_class(classes: tuple[PriorityClass, ...], defined: PriorityClass) -> tuple[PriorityClass, ...]:
    """The classes with `defined` added, or replacing the one of its name in place."""
    if any(c.name == defined.name for c in classes):
        return tuple(defined if c.name == defined.name else c for c in classes)
    return (*classes, defined)


def without_class(classes: tuple[PriorityClass, ...], name: str) -> tuple[PriorityClass, ...]:
    return tuple(c for c in classes if c.name != name)


def creation_order(specs: tuple[QueueSpec, ...]) -> tuple[QueueSpec, ...]:
    """Parents before children (a seeded file may list a team before its tenant)."""
    return tuple(sorted(specs, key=lambda spec: spec.name.count("/")))
