"""Staged decisions: placements for a gang are applied to a working snapshot one by one and then either
committed together or discarded together, so a partial gang never reaches the cluster view."""

from __future__ import annotations

from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot


class Statement:
    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._base = snapshot
        self._working = snapshot
        self._staged: list[tuple[TaskRequest, Assignment]] = []
        self._closed = False

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The view with every staged placement applied."""
        return self._working

    @property
    def staged(self) -> tuple[tuple[TaskRequest, Assignment], ...]:
        return tuple(self._staged)

    def stage(self, request: TaskRequest, where: Assignment) -> None:
        self._check_open()
        self._working = self._working.assign(request, where)
        self._staged.append((request, where))

    def commit(self) -> ClusterSnapshot:
        self._check_open()
        self._closed = True
        return self._working

    def discard(self) -> ClusterSnapshot:
        self._check_open()
        self._closed = True
        self._working = self._base
        self._staged.clear()
        return self._base

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("statement already committed or discarded")
