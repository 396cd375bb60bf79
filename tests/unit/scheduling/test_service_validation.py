"""SubmitJob validation: every bad field is named by its path; good specs come out resolved."""

from __future__ import annotations

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.data import data_path
from suanli.scheduling.entrypoints.validation import validate_submit
from suanli.scheduling.service_layer.errors import InvalidSpec
from suanli.scheduling.service_layer.queues_config import QueueConfigError, parse_queue_config


def _request(**task: object) -> pb.SubmitJobRequest:
    resources = {"cpu_milli": 1000, "gpu_count": 1, "gpu_milli": 1000}
    resources.update(task.pop("resources", {}))  # type: ignore[arg-type]
    task.setdefault("name", "w")
    spec = pb.TaskSpec(resources=pb.ResourceRequest(**resources), **task)  # type: ignore[arg-type]
    return pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[spec]))


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (pb.SubmitJobRequest(), "spec: is required"),
        (pb.SubmitJobRequest(spec=pb.JobSpec(tasks=[pb.TaskSpec()])), "spec.queue: is required"),
        (pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme")), "spec.tasks: at least one task is required"),
        (_request(resources={"gpu_milli": 1500}), "spec.tasks[0].resources.gpu_milli: must be 1..1000"),
        (
            _request(resources={"gpu_count": 2, "gpu_milli": 500}),
            "spec.tasks[0].resources.gpu_milli: a fractional share (below 1000) needs gpu_count 1",
        ),
        (
            _request(resources={"gpu_count": 0, "gpu_milli": 500}),
            "spec.tasks[0].resources.gpu_milli: must be 0 when gpu_count is 0",
        ),
        (_request(resources={"cpu_milli": -1}), "spec.tasks[0].resources.cpu_milli: must be >= 0"),
        (_request(duration_s=-1.0), "spec.tasks[0].duration_s: must be a finite number >= 0"),
        (_request(replicas=-2), "spec.tasks[0].replicas: must be 0..1000 (0 means 1)"),
        (_request(command="python 'unclosed"), "spec.tasks[0].command: cannot be split into words"),
        (_request(name="bad name"), "spec.tasks[0].name: must be 1..63 letters"),
    ],
)
def test_bad_fields_are_named(request_: pb.SubmitJobRequest, message: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        validate_submit(request_)
    assert str(info.value).startswith(message)


def test_gang_size_and_duplicate_names() -> None:
    request = _request(replicas=2)
    request.spec.min_available = 3
    with pytest.raises(InvalidSpec, match=r"^spec.min_available: must be 0..2"):
        validate_submit(request)
    request.spec.min_available = 0
    request.spec.tasks.append(request.spec.tasks[0])
    with pytest.raises(InvalidSpec, match="task name 'w-0' is used twice"):
        validate_submit(request)


def test_a_good_spec_is_resolved() -> None:
    spec = validate_submit(
        _request(command="python train.py", args=["--lr", "0.1"], replicas=2, resources={"gpu_milli": 0})
    )
    assert [t.name for t in spec.tasks] == ["w-0", "w-1"]
    assert spec.tasks[0].argv == ("python", "train.py", "--lr", "0.1")
    assert spec.tasks[0].gpu_milli == 1000  # unset means whole devices
    assert spec.min_available == 2 and spec.preemptible and spec.kind == "BATCH"


def test_queue_file_errors_name_the_path() -> None:
    with pytest.raises(
        QueueConfigError, match=r'queues\[0\].quotas\["gpu:A100"\].guaranteed: must be an integer'
    ):
        parse_queue_config("queues:\n  - name: acme\n    quotas: {gpu:A100: {guaranteed: -1}}\n")
    with pytest.raises(QueueConfigError, match="parent acme is not defined"):
        parse_queue_config("queues:\n  - name: acme/vision\n")
    config = parse_queue_config((data_path("deploy/scheduler/queues.yaml")).read_text())
    assert {q.name for q in config.queues} >= {"acme", "acme/vision"} and config.priority_classes
