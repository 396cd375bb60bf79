"""One table of limits: the YAML model and the scheduler's SubmitJob check refuse the same specs with the
same words (the wire prefixes `spec.`), and what the model accepts the scheduler accepts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import JobSpecError, to_proto, validate_document
from suanli.jobspec.ids import id_problem
from suanli.jobspec.limits import MAX_JOB_ENV_BYTES, MAX_TASKS
from suanli.jobspec.model import MAX_REPLICAS
from suanli.scheduling.entrypoints.validation import validate_submit
from suanli.scheduling.service_layer.errors import InvalidSpec


def _doc(tasks: list[dict[str, Any]], **job: Any) -> dict[str, Any]:
    return {"name": "train", "queue": "acme", "tasks": tasks, **job}


LABELS = {f"k{i}": "v" for i in range(65)}
BIG_ENV = {"BLOB": "x" * 5000}

CASES = [
    (_doc([{"name": "a", "replicas": 600}, {"name": "b", "replicas": 401}]), "tasks", "at most 1000 tasks"),
    (_doc([{"name": "a", "replicas": 1000, "env": BIG_ENV}]), "tasks", "replicas x environment at most"),
    (_doc([{"name": "a", "env": {f"V{i}": 1 for i in range(129)}}]), "tasks[0].env", "at most 128 variables"),
    (_doc([{"name": "a"}], labels=LABELS), "labels", "at most 64 labels (got 65)"),
    (_doc([{"name": "a", "command": "x" * 70_000}]), "tasks", "command and args at most 65536 bytes"),
    (_doc([{"name": "a"}], data_region="r" * 64), "data_region", "at most 63 characters"),
]


@pytest.mark.parametrize(("document", "path", "message"), CASES)
def test_the_model_and_the_scheduler_refuse_alike(document: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(JobSpecError) as caught:
        validate_document(document)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}: ") and message in problem
    # The same spec sent without the model's check: the scheduler's words are the model's.
    request = _wire(document)
    with pytest.raises(InvalidSpec) as refused:
        validate_submit(request)
    assert message in str(refused.value) and str(refused.value).startswith("spec.")


def _wire(document: dict[str, Any]) -> pb.SubmitJobRequest:
    """The wire request a client that skips the model would send for ``document``."""
    tasks = [
        pb.TaskSpec(
            name=t["name"],
            replicas=t.get("replicas", 1),
            command=t.get("command", ""),
            env={k: str(v) for k, v in (t.get("env") or {}).items()},
            resources=pb.ResourceRequest(cpu_milli=1000, memory_mib=1024),
        )
        for t in document["tasks"]
    ]
    spec = pb.JobSpec(
        name=document["name"],
        queue=document["queue"],
        labels=document.get("labels", {}),
        data_region=document.get("data_region", ""),
        tasks=tasks,
    )
    return pb.SubmitJobRequest(spec=spec)


def test_the_largest_spec_the_model_accepts_the_scheduler_accepts() -> None:
    per_replica = MAX_JOB_ENV_BYTES // MAX_TASKS
    env = {"BLOB": "x" * (per_replica - len("BLOB"))}
    spec = validate_document(_doc([{"name": "a", "replicas": MAX_TASKS, "env": env}], labels={"k": "v"}))
    accepted = validate_submit(pb.SubmitJobRequest(spec=to_proto(spec)))
    assert len(accepted.tasks) == MAX_TASKS
    assert all(id_problem(f"job-0123-{t.name}") is None for t in accepted.tasks)


@pytest.mark.parametrize("value", ["../../etc/x", ".x", "a/b", "", "a" * 254, "a b", "ü"])
def test_unsafe_ids(value: str) -> None:
    assert id_problem(value, "task_id") is not None


def test_the_task_limit_docs_jobspec_states_is_the_codes() -> None:
    """docs/jobspec.md's limits table says the number a person plans with; the code enforces its own."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "jobspec.md").read_text()
    row = re.search(
        r"^\| tasks per job, replicas included \| ([\d,]+) \(so `replicas` ≤ ([\d,]+) per group\)", text, re.M
    )
    assert row is not None, "docs/jobspec.md's limits table lost its tasks-per-job row"
    tasks, replicas = (int(n.replace(",", "")) for n in row.groups())
    assert (tasks, replicas) == (MAX_TASKS, MAX_REPLICAS)
