"""Demo workload files for `suanli up`: who submits what, how often and for how long, as a seeded plan.

A workload names tenants with a share of the arrivals; each tenant has a mix of job templates (a job
spec as in docs/jobspec.md, a weight, and a range of task durations). A `script` adds jobs at fixed
offsets (the scenario's milestones: a borrow, a preemption, an over-quota job), each optionally cancelled
a while after its submission. `plan()` turns it into a list of arrivals, a pure function of the file and
a run id: the same seed gives the same jobs at the same offsets. Format: docs/demo.md ("Workload files").
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import JobSpecError, to_proto, validate_document
from suanli.jobspec.errors import problems_of
from suanli.jobspec.units import parse_duration_s

# Room for the sequence suffix inside the job name limit of 63 characters.
_MAX_TEMPLATE_NAME = 56


class DemoWorkloadError(ValueError):
    """A workload file that cannot be planned; one `path: message` line per problem."""


def _seconds(value: object) -> float:
    return parse_duration_s(value)


Seconds = Annotated[float, BeforeValidator(_seconds)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Arrivals(_Model):
    # poisson: exponential gaps (bursty, like real users); uniform: one job every 60/per_minute s.
    pattern: Literal["poisson", "uniform"] = "poisson"
    per_minute: float = Field(gt=0, le=6000)


class Template(_Model):
    weight: float = Field(default=1.0, gt=0)
    # [min, max] seconds every task of the job holds its resources; one value means fixed.
    duration: tuple[Seconds, Seconds] | Seconds
    spec: dict[str, Any]

    @property
    def duration_range(self) -> tuple[float, float]:
        if isinstance(self.duration, tuple):
            return self.duration
        return (self.duration, self.duration)

    @model_validator(mode="after")
    def _ordered(self) -> Template:
        low, high = self.duration_range
        if low > high:
            raise ValueError(f"duration: min {low:g}s is above max {high:g}s")
        return self


class Scripted(_Model):
    """One job at a fixed offset from the start of submission."""

    at: Seconds = Field(ge=0)
    tenant: str
    duration: Seconds
    spec: dict[str, Any]
    # Cancel the job this long after its submission unless it has ended (a user giving up on a job that
    # cannot be admitted, so the run still ends with every job final).
    cancel_after: Seconds | None = None


class Tenant(_Model):
    name: str
    weight: float = Field(default=1.0, gt=0)
    mix: list[Template] = Field(min_length=1)


class DemoWorkload(_Model):
    """A demo workload file: the tenants that submit jobs and the mix each submits.

    Not the scheduler's ``Workload`` (kueue's term for an admitted job waiting or running in a queue).
    """

    seed: int = 0
    arrivals: Arrivals
    tenants: list[Tenant] = Field(min_length=1)
    script: list[Scripted] = Field(default_factory=list)

    @property
    def tenant_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tenants)


@dataclass(frozen=True, slots=True)
class Arrival:
    seq: int
    at_s: float  # offset from the start of submission
    tenant: str
    spec: pb.JobSpec
    request_id: str
    cancel_after_s: float | None = None  # see `Scripted.cancel_after`


def parse_workload(document: Any, source: str = "") -> DemoWorkload:
    where = f"{source}: " if source else ""
    try:
        workload = DemoWorkload.model_validate(document)
    except ValidationError as exc:
        raise DemoWorkloadError("\n".join(f"{where}{p}" for p in problems_of(exc))) from None
    problems = [
        f"{where}tenants[{t}].mix[{m}].spec: {problem}"
        for t, tenant in enumerate(workload.tenants)
        for m, template in enumerate(tenant.mix)
        for problem in _template_problems(tenant.name, template)
    ]
    tenants = set(workload.tenant_names)
    for s, scripted in enumerate(workload.script):
        if scripted.tenant not in tenants:
            problems.append(f"{where}script[{s}].tenant: {scripted.tenant!r} is not one of the tenants")
            continue
        template = Template(duration=scripted.duration, spec=scripted.spec)
        problems += [f"{where}script[{s}].spec: {p}" for p in _template_problems(scripted.tenant, template)]
    if problems:
        raise DemoWorkloadError("\n".join(problems))
    return workload


def load_workload(path: Path) -> DemoWorkload:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DemoWorkloadError(f"{path}: {exc}") from None
    return parse_workload(document, str(path))


def _template_problems(tenant: str, template: Template) -> list[str]:
    try:
        spec = validate_document(_instance(template.spec, "x", template.duration_range[0]))
    except JobSpecError as exc:
        return list(exc.problems)
    problems = []
    # Billing charges a job to the first segment of its queue: a template filed under the wrong
    # tenant would make the demo's per-tenant charges lie.
    if spec.queue.split("/", 1)[0] != tenant:
        problems.append(f"queue: {spec.queue!r} does not belong to tenant {tenant!r}")
    if len(spec.name) > _MAX_TEMPLATE_NAME:
        problems.append(f"name: at most {_MAX_TEMPLATE_NAME} characters in a workload template")
    return problems


def _instance(spec: dict[str, Any], suffix: str, duration_s: float) -> dict[str, Any]:
    document = copy.deepcopy(spec)
    document["name"] = f"{document.get('name', '')}-{suffix}"
    for task in document.get("tasks") or ():
        if isinstance(task, dict):
            task["duration"] = duration_s
    return document


def arrivals(workload: DemoWorkload, run_id: str) -> Iterator[Arrival]:
    """Arrivals in time order, without end: the random mix merged with the script (a scripted job first
    at equal offsets); request ids make a retried submit idempotent."""
    script = sorted(workload.script, key=lambda s: s.at)
    seq = itertools.count(1)
    for arrival in _random_arrivals(workload):
        while script and script[0].at <= arrival.at_s:
            yield _scripted(script.pop(0), next(seq), run_id)
        yield _numbered(arrival, next(seq), run_id)


def _scripted(scripted: Scripted, seq: int, run_id: str) -> Arrival:
    spec = validate_document(_instance(scripted.spec, f"{seq:03d}", scripted.duration))
    return Arrival(
        seq, round(scripted.at, 3), scripted.tenant, to_proto(spec), f"{run_id}-{seq}", scripted.cancel_after
    )


def _numbered(arrival: _Draw, seq: int, run_id: str) -> Arrival:
    spec = validate_document(_instance(arrival.template.spec, f"{seq:03d}", arrival.hold_s))
    return Arrival(seq, round(arrival.at_s, 3), arrival.tenant, to_proto(spec), f"{run_id}-{seq}")


@dataclass(frozen=True, slots=True)
class _Draw:
    at_s: float
    tenant: str
    template: Template
    hold_s: float


def _random_arrivals(workload: DemoWorkload) -> Iterator[_Draw]:
    rng = random.Random(workload.seed)
    uniform = workload.arrivals.pattern == "uniform"
    rate_per_s = workload.arrivals.per_minute / 60.0
    tenant_weights = [t.weight for t in workload.tenants]
    at = 0.0 if uniform else rng.expovariate(rate_per_s)
    while True:
        tenant = rng.choices(workload.tenants, weights=tenant_weights)[0]
        template = rng.choices(tenant.mix, weights=[m.weight for m in tenant.mix])[0]
        low, high = template.duration_range
        yield _Draw(at, tenant.name, template, round(rng.uniform(low, high), 1))
        at += 1.0 / rate_per_s if uniform else rng.expovariate(rate_per_s)


def plan(workload: DemoWorkload, duration_s: float, run_id: str) -> list[Arrival]:
    """Every arrival in [0, duration_s)."""
    return list(itertools.takewhile(lambda a: a.at_s < duration_s, arrivals(workload, run_id)))
