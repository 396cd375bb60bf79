"""The inference service spec: what to serve, on what, how many replicas, to which target, where.

```yaml
name: chat
queue: globex                       # the replicas' jobs' queue (the tenant is its first segment)
model: llama-2-13b                  # a model of models.py
resources: {gpu: 0.5, gpu_models: [A100 80GB SXM], cpu: 8, memory: 64Gi}   # per replica, as in job specs
min_replicas: 1
max_replicas: 40
target: {ttft_ms: 2000, tpot_ms: 100}   # a latency SLO, and/or {concurrency: 8} per replica
max_batch: 16                        # requests decoded together by one replica
regions: [dallas, frankfurt, tokyo]  # allowed regions (empty: any)
spread: regions                      # regions | zones | none: keep replicas apart for availability
scale_to_zero: false
cold_start_s: 60                     # replica start to ready (image, weights load, warm-up)
autoscaling: {policy: slo}           # slo | kpa | none (the default: the count is set by ScaleService)
```

Validation follows the job spec's standard (suanli.jobspec): unknown keys are refused, every problem is one
`path: message` line, and `validate_service` adds the checks that need the device catalogue (the model's
weights must fit the replica's GPU share) and the known regions.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from suanli.errors import InvalidArgument
from suanli.jobspec.errors import problems_of
from suanli.jobspec.limits import queue_problem
from suanli.jobspec.model import Resources, invalid
from suanli.replica.models import MODELS, ModelShape
from suanli.replica.service_time import ModelDoesNotFit, ReplicaSpeed, replica_speed
from suanli.resources import DeviceCatalogue

MAX_REPLICAS = 10_000
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_NAME = 63
MAX_BATCH = 1024
SpreadName = Literal["regions", "zones", "none"]
PolicyName = Literal["none", "kpa", "slo"]
MAX_WINDOW_S = 3600.0
# Settings of one policy only: naming one under the other policy is refused rather than ignored.
KPA_ONLY = (
    "target_utilization",
    "stable_window_s",
    "panic_window_s",
    "panic_threshold",
    "max_scale_up_rate",
    "max_scale_down_rate",
    "scale_to_zero_grace_s",
)
SLO_ONLY = ("down_window_s", "drain_s", "safety")


def e2e_target_s(
    ttft_s: float, tpot_s: float, generated_tokens: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """The end-to-end target of each request: TTFT target + TPOT target x (generated tokens - 1)."""
    return np.asarray(ttft_s + np.maximum(0, generated_tokens - 1) * tpot_s, dtype=np.float64)


class ServiceSpecError(InvalidArgument):
    """A service spec that cannot be created; `problems` holds one `path: message` line per fault."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(_Spec):
    """What the autoscaler sizes for: requests in flight per replica, and/or a latency SLO."""

    concurrency: float | None = None
    ttft_ms: float | None = None  # time to first token, as the client sees it
    tpot_ms: float | None = None  # time per output token after the first

    @model_validator(mode="after")
    def _some(self) -> Target:
        for name in ("concurrency", "ttft_ms", "tpot_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise invalid(f"{name} must be above 0 (got {value})")
        if (self.ttft_ms is None) != (self.tpot_ms is None):
            raise invalid("a latency SLO needs both ttft_ms and tpot_ms")
        if self.concurrency is None and self.ttft_ms is None:
            raise invalid("needs concurrency or a latency SLO (ttft_ms and tpot_ms)")
        return self

    @property
    def has_slo(self) -> bool:
        return self.ttft_ms is not None

    def e2e_target_s(self, generated_tokens: int) -> float:
        """End-to-end target of one request: TTFT target + one TPOT per generated token after the first."""
        if self.ttft_ms is None or self.tpot_ms is None:
            raise InvalidArgument("target has no latency SLO")
        return float(
            e2e_target_s(self.ttft_ms / 1000, self.tpot_ms / 1000, np.asarray([generated_tokens]))[0]
        )


class Autoscaling(_Spec):
    """Which autoscaler sets the replica count, and its settings (unset: the autoscaler's defaults)."""

    policy: PolicyName = "none"
    target_utilization: float | None = None  # kpa: share of target concurrency to aim at
    stable_window_s: float | None = None  # kpa
    panic_window_s: float | None = None  # kpa
    panic_threshold: float | None = None  # kpa: panic when the panic window asks this x ready
    max_scale_up_rate: float | None = None  # kpa: at most ready x this after one decision
    max_scale_down_rate: float | None = None  # kpa: at least ready / this after one decision
    scale_to_zero_grace_s: float | None = None  # kpa
    down_window_s: float | None = None  # slo: down only to the largest count needed within it
    drain_s: float | None = None  # slo: a backlog is sized to drain within this
    safety: float | None = None  # slo: size each replica for this share of the SLO

    @model_validator(mode="after")
    def _settings(self) -> Autoscaling:
        foreign: tuple[str, ...] = KPA_ONLY + SLO_ONLY
        if self.policy != "none":
            foreign = SLO_ONLY if self.policy == "kpa" else KPA_ONLY
        for name in foreign:
            if getattr(self, name) is not None:
                raise invalid(f"{name} is not a setting of policy {self.policy}")
        for name in ("stable_window_s", "panic_window_s", "down_window_s", "drain_s"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= MAX_WINDOW_S:
                raise invalid(f"{name} must be above 0 and at most {MAX_WINDOW_S:.0f} (got {value})")
        for name in ("target_utilization", "safety"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise invalid(f"{name} must be above 0 and at most 1 (got {value})")
        for name in ("panic_threshold", "max_scale_up_rate", "max_scale_down_rate"):
            value = getattr(self, name)
            if value is not None and not value > 1:
                raise invalid(f"{name} must be above 1 (got {value})")
        grace = self.scale_to_zero_grace_s
        if grace is not None and not 0 <= grace <= MAX_WINDOW_S:
            raise invalid(f"scale_to_zero_grace_s must be 0..{MAX_WINDOW_S:.0f} (got {grace})")
        stable, panic = self.stable_window_s, self.panic_window_s
        if stable is not None and panic is not None and panic > stable:
            raise invalid(f"panic_window_s ({panic}) must be at most stable_window_s ({stable})")
        return self


class ServiceSpec(_Spec):
    name: str
    model: str
    resources: Resources
    queue: str = (
        ""  # the tenant's queue the replicas' jobs go to (or `--queue`); the tenant is its first segment
    )
    command: str = ""  # what each replica runs (a simulated fleet needs none)
    args: list[str] = Field(default_factory=list)
    min_replicas: int = 1
    max_replicas: int = 1
    target: Target
    max_batch: int = 16
    regions: list[str] = Field(default_factory=list)
    spread: SpreadName = "regions"
    scale_to_zero: bool = False
    cold_start_s: float = 60.0
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > _MAX_NAME or not _NAME.match(value):
            raise invalid(
                f"must be lowercase letters, digits and '-', at most {_MAX_NAME} characters, starting and "
                f"ending with a letter or digit (got {value!r})"
            )
        return value

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str) -> str:
        problem = queue_problem(value) if value else None
        if problem:
            raise invalid(problem)
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value not in MODELS:
            raise invalid(f"unknown model {value!r}; known: {', '.join(sorted(MODELS))}")
        return value

    @field_validator("resources")
    @classmethod
    def _gpu(cls, value: Resources) -> Resources:
        if value.gpu is None:
            raise invalid("a replica needs a GPU (gpu: 1, or a share such as gpu: 0.5)")
        if len(value.gpu_models) != 1:
            raise invalid(f"name exactly one GPU model in gpu_models (got {len(value.gpu_models)})")
        return value

    @field_validator("max_batch")
    @classmethod
    def _batch(cls, value: int) -> int:
        if not 1 <= value <= MAX_BATCH:
            raise invalid(f"must be 1..{MAX_BATCH} (got {value})")
        return value

    @field_validator("cold_start_s")
    @classmethod
    def _cold(cls, value: float) -> float:
        if not 0 <= value <= 3600:
            raise invalid(f"must be 0..3600 seconds (got {value})")
        return value

    @model_validator(mode="after")
    def _replicas(self) -> ServiceSpec:
        if not 0 <= self.min_replicas <= self.max_replicas <= MAX_REPLICAS:
            raise invalid(
                f"replicas need 0 <= min_replicas <= max_replicas <= {MAX_REPLICAS} "
                f"(got {self.min_replicas} and {self.max_replicas})"
            )
        if self.max_replicas == 0:
            raise invalid("max_replicas must be at least 1")
        if self.min_replicas == 0 and not self.scale_to_zero:
            raise invalid("min_replicas 0 needs scale_to_zero: true")
        if len(set(self.regions)) != len(self.regions):
            raise invalid(f"regions lists a region twice: {self.regions}")
        policy = self.autoscaling.policy
        if policy == "kpa" and self.target.concurrency is None:
            raise invalid("autoscaling.policy kpa needs target.concurrency (requests in flight per replica)")
        if policy == "slo" and not self.target.has_slo:
            raise invalid("autoscaling.policy slo needs a latency SLO (target.ttft_ms and target.tpot_ms)")
        return self

    @property
    def gpus(self) -> float:
        """GPUs per replica (a fraction for a share of one device)."""
        gpu = self.resources.gpu
        assert gpu is not None  # the validator refuses a replica without one
        return gpu.count * gpu.milli / 1000

    @property
    def gpu_model(self) -> str:
        return self.resources.gpu_models[0]

    @property
    def shape(self) -> ModelShape:
        return MODELS[self.model]


def validate_service(
    document: Any, catalogue: DeviceCatalogue, known_regions: Collection[str] | None = None
) -> tuple[ServiceSpec, ReplicaSpeed]:
    """The spec and its replicas' speed, or `ServiceSpecError` listing every problem."""
    try:
        spec = ServiceSpec.model_validate(document)
    except ValidationError as exc:
        raise ServiceSpecError(problems_of(exc)) from None
    problems = []
    device = catalogue.lookup(spec.gpu_model)
    if not device.known:
        problems.append(f"resources.gpu_models: {spec.gpu_model!r} is not in the device catalogue")
    if known_regions is not None:
        unknown = [r for r in spec.regions if r not in known_regions]
        if unknown:
            problems.append(f"regions: unknown {unknown}; known: {', '.join(sorted(known_regions))}")
    if problems:
        raise ServiceSpecError(problems)
    try:
        speed = replica_speed(spec.shape, device, spec.gpus, spec.max_batch)
    except ModelDoesNotFit as exc:
        raise ServiceSpecError([f"resources.gpu: {exc}"]) from None
    return spec, speed
