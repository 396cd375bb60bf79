"""Why a workload is still pending: one machine-readable code, typed fields, and a message for people."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class ReasonCode(StrEnum):
    INADMISSIBLE = "INADMISSIBLE"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    NO_NODE_FITS = "NO_NODE_FITS"
    GANG_INCOMPLETE = "GANG_INCOMPLETE"
    WAITING_FOR_PREEMPTION = "WAITING_FOR_PREEMPTION"
    BLOCKED_BY_HIGHER_PRIORITY = "BLOCKED_BY_HIGHER_PRIORITY"
    NETWORK_CONSTRAINT = "NETWORK_CONSTRAINT"
    NO_REGION_FITS = "NO_REGION_FITS"
    UNSCHEDULABLE = "UNSCHEDULABLE"


class _Reason:
    __slots__ = ()
    code: ClassVar[ReasonCode]

    @property
    def message(self) -> str:
        raise NotImplementedError

    def as_dict(self) -> dict[str, object]:
        # Every reason is a dataclass; this base is not one, so the type checker is told.
        return {"code": str(self.code), "message": self.message, **asdict(cast("DataclassInstance", self))}


@dataclass(frozen=True, slots=True)
class Inadmissible(_Reason):
    code: ClassVar[ReasonCode] = ReasonCode.INADMISSIBLE
    queue: str
    detail: str

    @property
    def message(self) -> str:
        return f"queue {self.queue}: {self.detail}"


@dataclass(frozen=True, slots=True)
class QuotaExceeded(_Reason):
    code: ClassVar[ReasonCode] = ReasonCode.QUOTA_EXCEEDED
    queue: str
    resource: str
    requested: int
    available: int

    @property
    def message(self) -> str:
        return (
            f"quota of queue {self.queue} exceeded for {self.resource}: "
            f"requested {self.requested}, available {self.available}"
        )


@dataclass(frozen=True, slots=True)
class NoNodeFits(_Reason):
    code: ClassVar[ReasonCode] = ReasonCode.NO_NODE_FITS
    nodes: int
    rejections: tuple[tuple[str, int], ...]

    @property
    def message(self) -> str:
        detail = ", ".join(f"{count} rejected by {name}" for name, count in self.rejections)
        return f"0/{self.nodes} nodes fit: {detail or 'no nodes'}"


@dataclass(frozen=True, slots=True)
class GangIncomplete(_Reason):
    code: ClassVar[ReasonCode] = ReasonCode.GANG_INCOMPLETE
    placed: int
    min_available: int
    rejections: tuple[tuple[str, int], ...]

    @property
    def message(self) -> str:
        return f"only {self.placed} of {self.min_available} gang tasks could be placed; nothing was admitted"


@dataclass(frozen=True, slots=True)
class WaitingForPreemption(_Reason):
    code: ClassVar[ReasonCode] = ReasonCode.WAITING_FOR_PREEMPTION
    victims: tuple[str, ...]

    @property
    def message(self) -> str:
        return f"waiting for {len(self.victims)} preempted job(s) to stop: {', '.join(self.victims)}"


@dataclass(frozen=True, slots=True)
class BlockedByHigherPriority(_Reason):
    """The job would fit now, but only on resources reserved for jobs ahead of it in scheduling order."""

    code: ClassVar[ReasonCode] = ReasonCode.BLOCKED_BY_HIGHER_PRIORITY
    reserved_for: tuple[str, ...]
    nodes: tuple[str, ...]

    @property
    def message(self) -> str:
        return (
            f"fits only on resources reserved for {', '.join(self.reserved_for)} "
            f"(nodes {', '.join(self.nodes)}); backfill would delay them"
        )


def _per_region(regions: tuple[tuple[str, str], ...]) -> str:
    return "; ".join(f"{region}: {verdict}" for region, verdict in regions) or "no regions"


@dataclass(frozen=True, slots=True)
class NetworkConstraint(_Reason):
    """The job's RTT bound to its data region, or a DOWN link, rules out every region it could use."""

    code: ClassVar[ReasonCode] = ReasonCode.NETWORK_CONSTRAINT
    data_region: str
    max_rtt_ms: float | None
    regions: tuple[tuple[str, str], ...]  # (region, why it is ruled out)

    @property
    def message(self) -> str:
        bound = f", max RTT {self.max_rtt_ms:g} ms" if self.max_rtt_ms is not None else ""
        return (
            f"no region meets the network constraint (data region {self.data_region}{bound}): "
            f"{_per_region(self.regions)}"
        )

    def as_dict(self) -> dict[str, object]:
        return _as_dict(self)


@dataclass(frozen=True, slots=True)
class NoRegionFits(_Reason):
    """No single region (zone, fabric domain or node, for those localities) can hold the gang, so it is
    not split."""

    code: ClassVar[ReasonCode] = ReasonCode.NO_REGION_FITS
    gang: int
    locality: str
    regions: tuple[tuple[str, str], ...]  # (region, why the gang is not there)

    @property
    def message(self) -> str:
        within = _SINGLE.get(self.locality, "single region")
        return f"no {within} can hold the gang of {self.gang} tasks: {_per_region(self.regions)}"

    def as_dict(self) -> dict[str, object]:
        return _as_dict(self)


@dataclass(frozen=True, slots=True)
class Unschedulable(_Reason):
    """A task that no node of the fleet as it is could hold even with nothing else running, in the regions
    it may use: no quota, preemption or finished work changes that, only a node that joins (or a region the
    network stops ruling out). `resource` names the first constraint the nodes fail, in the order region,
    node_selector, gpu_model, gpu, cpu, memory; `largest` is the most any node meeting the earlier
    constraints has of it (with `node`, the first such node), and `regions` the verdict per region."""

    code: ClassVar[ReasonCode] = ReasonCode.UNSCHEDULABLE
    task: str
    resource: str
    requested: str
    largest: str
    node: str
    detail: str
    regions: tuple[tuple[str, str], ...]  # (region, why no node there can hold the task)

    @property
    def message(self) -> str:
        where = ", ".join(r for r, _ in self.regions) or "no regions"
        return (
            f"task {self.task} fits no node of the fleet, even an empty one: {self.detail} "
            f"(regions {where}); it waits for a node that can hold it to join"
        )

    def as_dict(self) -> dict[str, object]:
        return _as_dict(self)


_SINGLE = {"zone": "single zone", "fabric": "single fabric domain", "node": "single node"}


def _as_dict(reason: NetworkConstraint | NoRegionFits | Unschedulable) -> dict[str, object]:
    # The per-region detail as a list of {region, verdict}, which reads well as JSON and in explain.
    out = _Reason.as_dict(reason)
    out["regions"] = [{"region": r, "verdict": v} for r, v in reason.regions]
    return out


PendingReason = (
    Inadmissible
    | QuotaExceeded
    | NoNodeFits
    | GangIncomplete
    | WaitingForPreemption
    | BlockedByHigherPriority
    | NetworkConstraint
    | NoRegionFits
    | Unschedulable
)
