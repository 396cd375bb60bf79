"""The one table of job-spec limits and naming rules, read by the YAML model and the scheduler's wire check.

Each rule is a function returning the problem as text (``None`` when the value is fine), so the pydantic
model (`suanli.jobspec.model`) and the scheduler's validation of `SubmitJob` requests word a fault the same
way and can never disagree about where a limit lies. The caps are sized for what a job may carry through
the system: every replica's placement carries its task group's environment and command to a node, so
the total of replicas × environment is bounded as well as each group's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

KIB = 1024

MAX_NAME = 63
# DNS-label style: job and task names end up in task ids (`<job id>-<task>-<i>`), node-side log file
# names, process titles and labels.
NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_RULE = (
    f"lowercase letters, digits and '-', at most {MAX_NAME} characters, "
    "starting and ending with a letter or digit"
)
QUEUE_SEGMENT = re.compile(r"^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
MAX_QUEUE = 253
LABEL_KEY = re.compile(r"^[A-Za-z0-9]([-_./A-Za-z0-9]*[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

MAX_TASKS = 1000  # per job, replicas included; a task group's replicas are bounded by the same number
MAX_TASK_GROUPS = 100
MAX_GPUS_PER_TASK = 64
MAX_RETRIES = 100
MAX_REGION = 63  # data_region and each allowed region
MAX_REQUEST_ID = 128
MAX_REQUEST_BYTES = 256 * KIB  # a whole encoded SubmitJob request
MAX_LABELS = 64  # job labels, and a task's node selector
MAX_LABEL_VALUE = 253
MAX_ENV_VARS = 128  # per task group
MAX_ENV_BYTES = 64 * KIB  # per task group: names + values, UTF-8
MAX_JOB_ENV_BYTES = 4 * KIB * KIB  # per job: Σ replicas × the group's environment bytes
MAX_COMMAND_BYTES = 64 * KIB  # per task group: command + args, UTF-8


def name_problem(value: str, what: str = "a name") -> str | None:
    """Job, task and priority-class names."""
    if len(value) > MAX_NAME or not NAME_PATTERN.match(value):
        return f"must be {what} of {NAME_RULE} (got {value!r})"
    return None


def queue_problem(value: str) -> str | None:
    """A queue path: ``tenant`` or ``tenant/team/...``."""
    if len(value) > MAX_QUEUE or not all(QUEUE_SEGMENT.match(s) for s in value.split("/")):
        return (
            "must be a queue path like 'tenant' or 'tenant/team': segments of lowercase letters, "
            f"digits, '-' and '_' separated by '/', at most {MAX_QUEUE} characters (got {value!r})"
        )
    return None


def region_problem(value: str) -> str | None:
    """``data_region`` (empty allowed: no data region)."""
    if value != value.strip() or (value and not value.strip()) or len(value) > MAX_REGION:
        return (
            f"must be a region name of at most {MAX_REGION} characters without surrounding spaces "
            f"(got {value[:80]!r})"
        )
    return None


def labels_problem(labels: Mapping[str, str]) -> str | None:
    """Job labels and node selectors: how many, and each key and value."""
    if len(labels) > MAX_LABELS:
        return f"at most {MAX_LABELS} labels (got {len(labels)})"
    for key, value in labels.items():
        if len(key) > MAX_NAME or not LABEL_KEY.match(key):
            return f"{key[:80]!r} is not a valid label key"
        if len(value) > MAX_LABEL_VALUE:
            return f"label {key!r}: value at most {MAX_LABEL_VALUE} characters (got {len(value)})"
    return None


def env_bytes(env: Mapping[str, str]) -> int:
    """What an environment weighs: names and values, UTF-8."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in env.items())


def env_problem(env: Mapping[str, str]) -> str | None:
    """One task group's environment: names, how many, how big."""
    if len(env) > MAX_ENV_VARS:
        return f"at most {MAX_ENV_VARS} variables (got {len(env)})"
    for key in env:
        if not ENV_NAME.match(key):
            return f"{key[:80]!r} is not a valid environment variable name"
    size = env_bytes(env)
    if size > MAX_ENV_BYTES:
        return f"at most {MAX_ENV_BYTES} bytes of names and values (got {size})"
    return None


def command_problem(words: Iterable[str]) -> str | None:
    """One task group's command and arguments together."""
    size = sum(len(w.encode()) for w in words)
    if size > MAX_COMMAND_BYTES:
        return f"command and args at most {MAX_COMMAND_BYTES} bytes (got {size})"
    return None


def tasks_problem(groups: Iterable[tuple[int, Mapping[str, str]]]) -> str | None:
    """A job's (replicas, environment) per task group: how many tasks, and replicas × environment."""
    total = env_total = 0
    for replicas, env in groups:
        total += replicas
        env_total += replicas * env_bytes(env)
    if total > MAX_TASKS:
        return f"at most {MAX_TASKS} tasks per job, replicas included (got {total})"
    if env_total > MAX_JOB_ENV_BYTES:
        return (
            f"replicas x environment at most {MAX_JOB_ENV_BYTES} bytes per job (got {env_total}): "
            "each task's placement carries its group's environment"
        )
    return None
