"""The autoscaler's view of one service at a tick, built from its replicas' load reports.

A load report is full state plus counters since the replica started (`ReplicaLoadReported` v2):
requests taken and answered, context tokens taken and tokens generated. The arrivals of a tick and the
mean sizes of its requests are therefore differences of two reports of each replica:

- a replica's first report seen is its baseline (its counters cover a past the tick did not see);
- a counter smaller than the last seen means the replica restarted: the new value is all since then;
- a replica whose report went stale is forgotten, and baselined again if it comes back;
- a tick in which no request was answered keeps the last mean of generated tokens (the generated
  counter moves when a request ends, the context counter when it arrives).

Ready replicas are the service's serving replicas with a fresh report; starting ones are serving
replicas without one (ordered, placed or starting, not yet reporting). Concurrency and queued count every
fresh report of the service, a releasing replica's included: its requests are load all the same.
Pure: the time and the reports are passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from suanli.contracts.load import ReplicaLoad
from suanli.serving.domain.autoscaling import ScalerInputs


@dataclass(frozen=True, slots=True)
class _Counters:
    arrived: int
    finished: int
    context_tokens: int
    generated_tokens: int

    @classmethod
    def of(cls, load: ReplicaLoad) -> _Counters:
        return cls(
            load.arrived_total, load.finished_total, load.context_tokens_total, load.generated_tokens_total
        )

    def since(self, before: _Counters | None) -> _Counters:
        """What was counted after `before`; all of it when a counter went back (a restart)."""
        if before is None:
            return _Counters(0, 0, 0, 0)
        if any(now < then for now, then in zip(self.astuple(), before.astuple(), strict=True)):
            return self
        return _Counters(
            self.arrived - before.arrived,
            self.finished - before.finished,
            self.context_tokens - before.context_tokens,
            self.generated_tokens - before.generated_tokens,
        )

    def astuple(self) -> tuple[int, int, int, int]:
        return (self.arrived, self.finished, self.context_tokens, self.generated_tokens)


@dataclass(slots=True)
class LoadSampler:
    """One service's counters at the last tick; `sample` turns the fresh reports into `ScalerInputs`."""

    tick_s: float  # the interval assumed before the first tick
    _counters: dict[str, _Counters] = field(default_factory=dict)
    _last_s: float | None = None
    _mean_generated: float = 0.0

    def sample(
        self, now_s: float, reports: Mapping[str, ReplicaLoad], serving: Collection[str]
    ) -> ScalerInputs:
        """The inputs at `now_s` from the service's fresh reports (by replica id) and its serving replicas."""
        arrived = finished = context = generated = 0
        for replica_id, load in reports.items():
            counted = _Counters.of(load)
            delta = counted.since(self._counters.get(replica_id))
            self._counters[replica_id] = counted
            arrived += delta.arrived
            finished += delta.finished
            context += delta.context_tokens
            generated += delta.generated_tokens
        for gone in set(self._counters) - set(reports):
            del self._counters[gone]
        if finished:
            self._mean_generated = generated / finished
        interval = self.tick_s if self._last_s is None else max(now_s - self._last_s, 0.0)
        self._last_s = now_s
        ready = sum(replica_id in reports for replica_id in serving)
        return ScalerInputs(
            now_s=now_s,
            ready=ready,
            starting=len(serving) - ready,
            concurrency=float(sum(r.in_flight + r.queued for r in reports.values())),
            queued=sum(r.queued for r in reports.values()),
            arrivals=arrived,
            interval_s=interval,
            mean_context=context / arrived if arrived else 0.0,
            mean_generated=self._mean_generated,
        )
