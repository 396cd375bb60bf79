"""The load view: each replica's latest load report, forgotten once it has missed a few.

Reports are full state (`ReplicaLoadReported` on `services.load`), so the newest per replica is the
whole truth and a lost or repeated report heals with the next one. A replica whose last report is
older than `STALE_INTERVALS` of its own interval is left out: it stopped reporting (killed, partitioned)
and a balancer or autoscaler must not count it as serving. Pure: the time is passed in.

In the kernel because two services keep this view: serving (its autoscalers) and routing (its balancers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from suanli.errors import InvalidArgument

STALE_INTERVALS = 3
# Stale reports are dropped every this many reports: a sweep per report would cost O(replicas) each.
SWEEP_EVERY = 256


class InvalidLoad(InvalidArgument):
    """A load report whose numbers cannot be (dead-lettered with this message)."""


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """One replica's load report, checked (`InvalidLoad` names a number that cannot be)."""

    service_id: str
    replica_id: str
    region: str
    address: str
    in_flight: int
    queued: int
    max_batch: int
    prefill_tokens_per_s: float
    decode_step_s: float
    recent_latency_s: float
    prefill_backlog_s: float
    kv_free_tokens: int
    interval_s: float
    reported_at: datetime
    # Counters since the replica started (v2; 0 in v1 reports): rates are differences of two reports.
    arrived_total: int = 0
    finished_total: int = 0
    context_tokens_total: int = 0
    generated_tokens_total: int = 0

    def __post_init__(self) -> None:
        if not self.service_id or not self.replica_id:
            raise InvalidLoad("a load report names its service_id and replica_id")
        counters = ("arrived_total", "finished_total", "context_tokens_total", "generated_tokens_total")
        for name in ("in_flight", "queued", "kv_free_tokens", *counters):
            if getattr(self, name) < 0:
                raise InvalidLoad(f"{name}: must be 0 or more (got {getattr(self, name)})")
        if self.max_batch < 1:
            raise InvalidLoad(f"max_batch: must be 1 or more (got {self.max_batch})")
        for name in ("prefill_tokens_per_s", "decode_step_s", "recent_latency_s", "prefill_backlog_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise InvalidLoad(f"{name}: must be a finite number, 0 or more (got {value})")
        if not math.isfinite(self.interval_s) or self.interval_s <= 0:
            raise InvalidLoad(f"interval_s: must be above 0 (got {self.interval_s})")

    def fresh(self, now: datetime) -> bool:
        """Whether the report is at most `STALE_INTERVALS` of the replica's own interval old."""
        return now - self.reported_at <= timedelta(seconds=STALE_INTERVALS * self.interval_s)


class LoadView:
    """The newest report per replica; `of` answers the fresh ones of a service."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], ReplicaLoad] = {}
        self._reports = 0

    def report(self, load: ReplicaLoad, now: datetime) -> bool:
        """Keep `load` unless a newer report of the replica is held; False when it was not kept."""
        key = (load.service_id, load.replica_id)
        held = self._latest.get(key)
        if held is not None and held.reported_at >= load.reported_at:
            return False
        self._latest[key] = load
        self._reports += 1
        if self._reports % SWEEP_EVERY == 0:
            self._forget_stale(now)
        return True

    def __len__(self) -> int:
        return len(self._latest)

    def of(self, service_id: str, now: datetime) -> dict[str, ReplicaLoad]:
        """The fresh reports of a service's replicas, by replica id."""
        return {r: load for (s, r), load in self._latest.items() if s == service_id and load.fresh(now)}

    def knows(self, service_id: str) -> bool:
        """Whether any report of the service is held, fresh or not (stale ones go at the next sweep)."""
        return any(s == service_id for s, _ in self._latest)

    def fresh(self, now: datetime) -> list[ReplicaLoad]:
        """Every fresh report, of every service."""
        return [load for load in self._latest.values() if load.fresh(now)]

    def _forget_stale(self, now: datetime) -> None:
        stale = [key for key, load in self._latest.items() if not load.fresh(now)]
        for key in stale:
            del self._latest[key]


def load_from_record(record: Mapping[str, Any]) -> ReplicaLoad:
    """A ReplicaLoadReported record as a ReplicaLoad; `InvalidLoad` names what is wrong."""
    try:
        return ReplicaLoad(
            service_id=record["service_id"],
            replica_id=record["replica_id"],
            region=record["region"],
            address=record["address"],
            in_flight=int(record["in_flight"]),
            queued=int(record["queued"]),
            max_batch=int(record["max_batch"]),
            prefill_tokens_per_s=float(record["prefill_tokens_per_s"]),
            decode_step_s=float(record["decode_step_s"]),
            recent_latency_s=float(record["recent_latency_s"]),
            prefill_backlog_s=float(record["prefill_backlog_s"]),
            kv_free_tokens=int(record["kv_free_tokens"]),
            interval_s=float(record["interval_s"]),
            reported_at=record["occurred_at"],
            arrived_total=int(record.get("arrived_total", 0)),
            finished_total=int(record.get("finished_total", 0)),
            context_tokens_total=int(record.get("context_tokens_total", 0)),
            generated_tokens_total=int(record.get("generated_tokens_total", 0)),
        )
    except KeyError as exc:
        raise InvalidLoad(f"ReplicaLoadReported without {exc.args[0]}") from None


def load_record(load: ReplicaLoad) -> dict[str, Any]:
    """The fields of a ReplicaLoadReported record for `load`.

    The producer adds the envelope, whose ``occurred_at`` is the report's time.
    """
    return {
        "service_id": load.service_id,
        "replica_id": load.replica_id,
        "region": load.region,
        "address": load.address,
        "in_flight": load.in_flight,
        "queued": load.queued,
        "max_batch": load.max_batch,
        "prefill_tokens_per_s": load.prefill_tokens_per_s,
        "decode_step_s": load.decode_step_s,
        "recent_latency_s": load.recent_latency_s,
        "prefill_backlog_s": load.prefill_backlog_s,
        "kv_free_tokens": load.kv_free_tokens,
        "interval_s": load.interval_s,
        "arrived_total": load.arrived_total,
        "finished_total": load.finished_total,
        "context_tokens_total": load.context_tokens_total,
        "generated_tokens_total": load.generated_tokens_total,
    }
