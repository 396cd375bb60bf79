"""The YAML job spec as pydantic models.

Attributes hold canonical units (milli-cores, MiB, milli-GPU, seconds); YAML keys are the human names
(`cpu`, `memory`, `duration`) via aliases, so error paths name what the user wrote. Every check raises
`invalid(...)`, whose text is the whole message: `errors.py` prefixes it with the field path.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from suanli.jobspec import limits
from suanli.jobspec.limits import MAX_GPUS_PER_TASK, MAX_RETRIES, MAX_TASKS
from suanli.jobspec.units import parse_cpu_milli, parse_duration_s, parse_memory_mib

GPU_MILLI = 1000
# A task group's replicas are bounded by the job's task cap: one number, one place (limits.py).
MAX_REPLICAS = MAX_TASKS
DEFAULT_CPU_MILLI = 1000
DEFAULT_MEMORY_MIB = 1024

_T = TypeVar("_T")

JobKindName = Literal["training", "inference", "batch"]
LocalityName = Literal["node", "fabric", "zone", "region", "any"]


def invalid(message: str) -> PydanticCustomError:
    """The error every rule raises; `message` is the whole text after the field path."""
    # The message travels as context, not as the template, so braces in user input cannot break it.
    return PydanticCustomError("jobspec", "{reason}", {"reason": message})


def _bounded(value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise invalid(f"must be {low}..{high} (got {value})")
    return value


def _ok(problem: str | None) -> None:
    """Raise a limits rule's problem as this model's error."""
    if problem is not None:
        raise invalid(problem)


def _name(value: str, what: str = "a name") -> str:
    _ok(limits.name_problem(value, what))
    return value


def _stringify_scalars(value: Any) -> Any:
    """YAML reads `PORT: 8080` or `debug: true` as numbers and booleans; env and labels are strings."""
    if not isinstance(value, dict):
        return value
    return {
        k: (str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, int | float) else v)
        for k, v in value.items()
    }


def _label_keys(value: dict[str, str]) -> dict[str, str]:
    _ok(limits.labels_problem(value))
    return value


# Job labels and a task's node selector are the same kind of map: label keys to label values.
_LabelMap = Annotated[dict[str, str], BeforeValidator(_stringify_scalars), AfterValidator(_label_keys)]


def _distinct(values: list[str], what: str) -> list[str]:
    for value in values:
        if not value.strip():
            raise invalid(f"{what} must not be empty")
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise invalid(f"duplicate {what} {', '.join(duplicates)}")
    return values


class _Spec(BaseModel):
    # Unknown keys are refused: a misspelt `replica:` silently ignored would run the wrong job.
    # Attributes are only ever set through their YAML names: `cpu_milli=4000` by name would be parsed as
    # 4000 cores, so population by attribute name stays off.
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuRequest(_Spec):
    """`count` GPUs of `milli`/1000 each; a fraction only on one shared GPU.

    `memory` caps the GPU memory the task may use (0: no cap), which is what keeps tasks sharing one GPU
    apart.
    """

    count: int = 1
    milli: int = GPU_MILLI
    memory_mib: int = Field(0, alias="memory")

    @field_validator("count")
    @classmethod
    def _count(cls, value: int) -> int:
        return _bounded(value, 1, MAX_GPUS_PER_TASK)

    @field_validator("milli")
    @classmethod
    def _milli(cls, value: int, info: ValidationInfo) -> int:
        _bounded(value, 1, GPU_MILLI)
        count = info.data.get("count", 1)
        if value < GPU_MILLI and count != 1:
            # A shared task must fit inside one device; it is never split across devices.
            raise invalid(f"below {GPU_MILLI} (a shared GPU) only with count 1 (got count {count})")
        return value

    @field_validator("memory_mib", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> int:
        return _parse(parse_memory_mib, value)


def _gpu_shorthand(value: Any) -> Any:
    """`gpu: 2` is two whole GPUs, `gpu: 0.3` is 300 milli of one shared GPU, `gpu: 0` is none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if value == 0:
        return None
    if value == int(value):
        return {"count": int(value)}
    if 0 < value < 1:
        milli = round(value * GPU_MILLI, 6)
        if milli != int(milli):
            raise invalid(f"a GPU fraction must be a whole number of milli-GPU, e.g. 0.25 (got {value})")
        return {"count": 1, "milli": int(milli)}
    raise invalid(f"must be a whole number of GPUs or a fraction of one GPU below 1 (got {value})")


class Resources(_Spec):
    """What one task asks of a node, in canonical units, with its placement allow-lists."""

    cpu_milli: int = Field(DEFAULT_CPU_MILLI, alias="cpu")
    memory_mib: int = Field(DEFAULT_MEMORY_MIB, alias="memory")
    gpu: GpuRequest | None = None
    gpu_models: list[str] = Field(default_factory=list)
    node_selector: _LabelMap = Field(default_factory=dict)
    regions: list[str] = Field(default_factory=list)

    @field_validator("cpu_milli", mode="before")
    @classmethod
    def _cpu(cls, value: Any) -> int:
        return _parse(parse_cpu_milli, value)

    @field_validator("memory_mib", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> int:
        return _parse(parse_memory_mib, value)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, value: Any) -> Any:
        return _gpu_shorthand(value)

    @field_validator("gpu_models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        return _distinct(value, "GPU model")

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        return _distinct(value, "region")

    @property
    def gpu_count(self) -> int:
        """GPUs asked for (0 without a GPU)."""
        return self.gpu.count if self.gpu else 0

    @property
    def gpu_milli(self) -> int:
        """Milli-GPU of each device (0 without a GPU)."""
        return self.gpu.milli if self.gpu else 0

    @property
    def gpu_memory_mib(self) -> int:
        """The GPU memory cap in MiB (0: no cap)."""
        return self.gpu.memory_mib if self.gpu else 0


class TaskSpec(_Spec):
    """A task group: `replicas` tasks with one resource request and command."""

    name: str
    replicas: int = 1
    resources: Resources = Field(default_factory=lambda: Resources.model_validate({}))
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    duration_s: float = Field(0.0, alias="duration")

    @field_validator("name")
    @classmethod
    def _task_name(cls, value: str) -> str:
        return _name(value)

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, value: int) -> int:
        return _bounded(value, 1, MAX_REPLICAS)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        # The agent splits the command like a shell would; an unbalanced quote would fail only there.
        try:
            shlex.split(value)
        except ValueError as exc:
            raise invalid(f"cannot be split into words like a shell would: {exc} (got {value!r})") from None
        return value

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        return (
            [str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in value]
            if isinstance(value, list)
            else value
        )

    @field_validator("env", mode="before")
    @classmethod
    def _env_values(cls, value: Any) -> Any:
        return _stringify_scalars(value)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        _ok(limits.env_problem(value))
        return value

    @field_validator("duration_s", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return _parse(parse_duration_s, value)


class JobSpec(_Spec):
    """A job: one or more task groups admitted to a queue together (a gang when min_available says so).

    Field order matters: validators of later fields read earlier ones (min_available reads tasks).
    """

    name: str
    queue: str
    kind: JobKindName = "batch"
    priority_class: str = ""
    best_effort: bool = False
    preemptible: bool = True
    max_retries: int = 0
    labels: _LabelMap = Field(default_factory=dict)
    tasks: list[TaskSpec]
    min_available: int = 0
    data_region: str = ""
    max_rtt_ms: float | None = None
    locality: LocalityName | None = None
    min_bandwidth_gbps: float | None = None

    @field_validator("name")
    @classmethod
    def _job_name(cls, value: str) -> str:
        return _name(value)

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str) -> str:
        _ok(limits.queue_problem(value))
        return value

    @field_validator("priority_class")
    @classmethod
    def _priority_class(cls, value: str) -> str:
        return _name(value, "a priority class name") if value else value

    @field_validator("preemptible")
    @classmethod
    def _preemptible(cls, value: bool, info: ValidationInfo) -> bool:
        if not value and info.data.get("best_effort"):
            # Best-effort work runs on capacity lent by others and must give it back on demand.
            raise invalid("must be true when best_effort is true")
        return value

    @field_validator("max_retries")
    @classmethod
    def _retries(cls, value: int) -> int:
        return _bounded(value, 0, MAX_RETRIES)

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value: list[TaskSpec]) -> list[TaskSpec]:
        if not value:
            raise invalid("must list at least one task")
        if len(value) > limits.MAX_TASK_GROUPS:
            raise invalid(f"at most {limits.MAX_TASK_GROUPS} task groups (got {len(value)})")
        _distinct([t.name for t in value], "task name")
        _ok(limits.tasks_problem((t.replicas, t.env) for t in value))
        for t in value:
            _ok(limits.command_problem([t.command, *t.args]))
        return value

    @field_validator("min_available")
    @classmethod
    def _gang(cls, value: int, info: ValidationInfo) -> int:
        tasks = info.data.get("tasks")
        if tasks is None:  # tasks already failed; their error is the one worth reading
            return value
        return _bounded(value, 0, sum(t.replicas for t in tasks))

    @field_validator("data_region")
    @classmethod
    def _data_region(cls, value: str) -> str:
        _ok(limits.region_problem(value))
        return value

    @field_validator("max_rtt_ms")
    @classmethod
    def _max_rtt(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:
            return value
        _finite_at_least(value, 0.0)
        if not info.data.get("data_region"):
            raise invalid("needs data_region: the round-trip time is measured to the data region")
        return value

    @field_validator("locality")
    @classmethod
    def _locality(cls, value: str | None, info: ValidationInfo) -> str | None:
        tasks = info.data.get("tasks")
        if value is None or tasks is None:
            return value
        gang = info.data.get("min_available") or sum(t.replicas for t in tasks)
        if gang < 2:
            raise invalid(
                f"applies only to a gang (2 or more tasks placed together); this job places {gang} together"
            )
        return value

    @field_validator("min_bandwidth_gbps")
    @classmethod
    def _bandwidth(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:
            return value
        if value <= 0 or not math.isfinite(value):
            raise invalid(f"must be a number > 0 (got {value})")
        if info.data.get("locality") != "any":
            raise invalid("only with locality 'any' (a gang in one region or zone shares its network)")
        return value

    @property
    def task_count(self) -> int:
        """Tasks after expanding replicas."""
        return sum(t.replicas for t in self.tasks)

    @property
    def gang_size(self) -> int:
        """Tasks that must be placed together (min_available, or every task when 0)."""
        return self.min_available or self.task_count


def _finite_at_least(value: float, low: float) -> float:
    if not math.isfinite(value) or value < low:
        raise invalid(f"must be a number >= {low:g} (got {value})")
    return value


def _parse(parser: Callable[[object], _T], value: object) -> _T:
    try:
        return parser(value)
    except ValueError as exc:
        raise invalid(str(exc)) from None
