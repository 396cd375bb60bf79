"""Queues (ClusterQueue-like): a tree named by path, each with quota per flavour and an optional cohort.

`acme/vision` is a child of `acme`; everything admitted to a child also counts against each ancestor,
so a tenant's quota caps the sum of its teams.
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.scheduling.domain.queueing.resources import gpu_model_of


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota for one flavour.

    guaranteed: promised to the queue; the basis of fair share and of reclaim.
    maximum: a hard ceiling on the queue's (subtree's) usage whatever the source; None = no extra ceiling.
    borrowing_limit: how far beyond `guaranteed` the queue may go using its cohort's unused quota;
        None = as far as the cohort can lend.
    lending_limit: how much of `guaranteed` the cohort may borrow while it is unused; None = all of it.
        The rest (guaranteed - lending_limit) is never lent, so it is available without reclaim.
    """

    resource: str
    guaranteed: int
    maximum: int | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    def __post_init__(self) -> None:
        if self.guaranteed < 0:
            raise ValueError(f"{self.resource}: guaranteed must be >= 0")
        if self.maximum is not None and self.maximum < self.guaranteed:
            raise ValueError(f"{self.resource}: maximum {self.maximum} below guaranteed {self.guaranteed}")
        if self.borrowing_limit is not None and self.borrowing_limit < 0:
            raise ValueError(f"{self.resource}: borrowing_limit must be >= 0")
        if self.lending_limit is not None and not 0 <= self.lending_limit <= self.guaranteed:
            raise ValueError(f"{self.resource}: lending_limit must be in 0..guaranteed")

    @property
    def lendable(self) -> int:
        return self.guaranteed if self.lending_limit is None else self.lending_limit

    @property
    def kept(self) -> int:
        """The part of the guarantee never lent out."""
        return self.guaranteed - self.lendable


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    quotas: tuple[ResourceQuota, ...] = ()
    cohort: str | None = None
    stopped: bool = False

    def __post_init__(self) -> None:
        if not self.name or self.name.startswith("/") or self.name.endswith("/") or "//" in self.name:
            raise ValueError(f"bad queue name {self.name!r}")
        resources = [quota.resource for quota in self.quotas]
        if len(resources) != len(set(resources)):
            raise ValueError(f"queue {self.name}: a flavour is listed twice")

    @property
    def parent(self) -> str | None:
        head, _, _ = self.name.rpartition("/")
        return head or None

    def quota(self, resource: str) -> ResourceQuota | None:
        return next((quota for quota in self.quotas if quota.resource == resource), None)


class QueueTree:
    """Validated index over the queue specs: ancestry, cohorts, declared GPU models."""

    def __init__(self, specs: tuple[QueueSpec, ...]) -> None:
        self._specs = {spec.name: spec for spec in specs}
        if len(self._specs) != len(specs):
            raise ValueError("duplicate queue name")
        for spec in specs:
            if spec.parent is not None and spec.parent not in self._specs:
                raise ValueError(f"queue {spec.name}: parent {spec.parent} is not defined")
        self._cohorts: dict[str, list[QueueSpec]] = {}
        for spec in specs:
            if spec.cohort is not None:
                self._cohorts.setdefault(spec.cohort, []).append(spec)

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    @property
    def has_cohorts(self) -> bool:
        return bool(self._cohorts)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    @property
    def specs(self) -> tuple[QueueSpec, ...]:
        return tuple(self._specs.values())

    def chain(self, name: str) -> tuple[QueueSpec, ...]:
        """The queue and its ancestors, leaf first."""
        out: list[QueueSpec] = []
        current: str | None = name
        while current is not None:
            spec = self._specs[current]
            out.append(spec)
            current = spec.parent
        return tuple(out)

    def cohort_members(self, cohort: str) -> tuple[QueueSpec, ...]:
        return tuple(self._cohorts.get(cohort, ()))

    def stopped(self, name: str) -> bool:
        return any(spec.stopped for spec in self.chain(name))

    def declared_gpu_models(self, name: str) -> tuple[str, ...]:
        """GPU models with quota anywhere up the chain, in declaration order (leaf first): the flavours a
        job of this queue may be assigned, tried in this order."""
        models: list[str] = []
        for spec in self.chain(name):
            for quota in spec.quotas:
                model = gpu_model_of(quota.resource)
                if model is not None and model not in models:
                    models.append(model)
        return tuple(models)
