"""Right-sizing a replica: which GPU share serves the most requests within the SLO per GPU.

A replica's share of a device scales its FLOPs, bandwidth and memory together (service_time.py), but not
its needs alike: the weights take a fixed amount of memory, so the KV cache a share leaves grows faster than
the share (half an A100 80GB leaves 10 GiB for a 13B model's cache, a whole one 46 GiB), while the batch
limit (`max_batch`) caps what a large share can use. When the KV cache binds, a larger share serves more per
GPU; once the batch limit binds, a larger one serves less per GPU. `right_size` weighs every candidate share
with the queueing model (capacity.py) for a mix of request sizes and answers them best first, each with
the limit that binds at its capacity, so the choice explains itself.

Candidate shares (`SHARES`): eighths of one GPU below one (a shared GPU is granted in milli-GPU,
docs/jobspec.md, and eighths keep the choice coarse enough for a scheduler to pack), and 1, 2, 4 or 8 whole
GPUs (tensor-parallel, optimistic by the all-reduce as service_time.py says). Shares that cannot hold the
weights are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from suanli.replica.models import ModelShape
from suanli.replica.service_time import ModelDoesNotFit, ReplicaSpeed, replica_speed
from suanli.resources import DeviceClass
from suanli.serving.domain.capacity import meets, operating_point, slo_capacity

SHARES: tuple[float, ...] = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 2.0, 4.0, 8.0)
_PAST_CAPACITY = 1.001  # a rate just above capacity: the binding limit is the first one it breaks
_TIE = 0.999  # per-GPU capacities within 0.1 % of the best count as equal


@dataclass(frozen=True, slots=True)
class ShareOption:
    """One candidate share: its speed, what it serves within the SLO, and what stops it serving more."""

    gpus: float
    speed: ReplicaSpeed
    capacity: float  # requests/s within the SLO for the mix
    limit: str  # prefill | batch | kv-cache | ttft | tpot | none

    @property
    def per_gpu(self) -> float:
        return self.capacity / self.gpus

    def explain(self) -> str:
        return (
            f"{self.gpus:g} GPU: {self.capacity:.3g} requests/s within the SLO, {self.per_gpu:.3g} per GPU, "
            f"bound by {self.limit}"
        )


def binding_limit(
    speed: ReplicaSpeed,
    capacity: float,
    context: float,
    generated: float,
    ttft_s: float,
    tpot_s: float,
    kv_product: float | None = None,
) -> str:
    """The first limit of capacity.py's `meets` that a rate just above `capacity` breaks."""
    point = operating_point(speed, capacity * _PAST_CAPACITY, context, generated, kv_product)
    if point is None:
        return "prefill"
    if meets(point, speed, ttft_s, tpot_s):
        return "none"
    checks = (
        ("batch", point.batch > speed.max_batch),
        ("kv-cache", point.kv_tokens > speed.kv_capacity_tokens),
        ("ttft", point.ttft_s > ttft_s),
        ("tpot", point.tpot_s > tpot_s),
    )
    return next(name for name, broken in checks if broken)


def right_size(
    model: ModelShape,
    device: DeviceClass,
    max_batch: int,
    context: float,
    generated: float,
    ttft_s: float,
    tpot_s: float,
    kv_product: float | None = None,
    shares: Sequence[float] = SHARES,
) -> tuple[ShareOption, ...]:
    """Every share of `shares` that holds `model` and meets the SLO, the most requests per GPU first.

    Ties (within 0.1 %) go to the smaller share: finer replicas follow the load more closely.
    """
    options = []
    for gpus in shares:
        try:
            speed = replica_speed(model, device, gpus, max_batch)
        except ModelDoesNotFit:
            continue
        capacity = slo_capacity(speed, context, generated, ttft_s, tpot_s, 1.0, kv_product)
        if capacity <= 0:
            continue
        limit = binding_limit(speed, capacity, context, generated, ttft_s, tpot_s, kv_product)
        options.append(ShareOption(gpus, speed, capacity, limit))
    best = max((o.per_gpu for o in options), default=0.0)
    tied = sorted((o for o in options if o.per_gpu >= best * _TIE), key=lambda o: o.gpus)
    rest = sorted((o for o in options if o.per_gpu < best * _TIE), key=lambda o: -o.per_gpu)
    return (*tied, *rest)
