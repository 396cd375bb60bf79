"""SubmitJob validation: every bad field is named by its path; good specs come out resolved."""

from __future__ import annotations

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.data import data_path
from suanli.resources import default_catalogue
from suanli.scheduling.entrypoints.validation import check_gpu_models, validate_submit
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
        (_request(name="bad name"), "spec.tasks[0].name: must be a name of lowercase letters"),
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


def _gang(**spec: object) -> pb.SubmitJobRequest:
    task = pb.TaskSpec(name="w", replicas=4, resources=pb.ResourceRequest(cpu_milli=1000))
    return pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task], **spec))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (_gang(max_rtt_ms=20), "spec.max_rtt_ms: needs spec.data_region (the RTT is measured to it)"),
        (_gang(data_region="tokyo", max_rtt_ms=-1), "spec.max_rtt_ms: must be a finite number >= 0"),
        (
            _gang(data_region="tokyo", max_rtt_ms=float("inf")),
            "spec.max_rtt_ms: must be a finite number >= 0",
        ),
        (_gang(data_region=" tokyo"), "spec.data_region: must be a region name"),
        (_gang(locality=7), "spec.locality: unknown locality 7"),
        (
            _gang(min_available=1, locality=pb.LOCALITY_ZONE),
            "spec.locality: applies only to a gang (2 or more tasks placed together); this job places 1",
        ),
        (
            _gang(locality=pb.LOCALITY_REGION, min_bandwidth_gbps=1),
            "spec.min_bandwidth_gbps: only with locality any",
        ),
        (
            _gang(locality=pb.LOCALITY_ANY, min_bandwidth_gbps=-1),
            "spec.min_bandwidth_gbps: must be a finite number > 0",
        ),
    ],
)
def test_bad_network_fields_are_named(request_: pb.SubmitJobRequest, message: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        validate_submit(request_)
    assert str(info.value).startswith(message)


def test_network_fields_come_out_resolved_and_old_clients_get_the_defaults() -> None:
    spec = validate_submit(
        _gang(data_region="tokyo", max_rtt_ms=35.5, locality=pb.LOCALITY_ANY, min_bandwidth_gbps=2)
    )
    assert (spec.data_region, spec.max_rtt_ms, spec.locality, spec.min_bandwidth_gbps) == (
        "tokyo",
        35.5,
        "any",
        2,
    )
    job = spec.domain_job("j")
    assert job.tasks[0].request.data_region == "tokyo" and job.tasks[0].request.max_rtt_ms == 35.5
    old = validate_submit(_gang())
    assert (old.data_region, old.max_rtt_ms, old.locality, old.min_bandwidth_gbps) == ("", None, "", None)
    assert old.domain_job("j").placement_locality == "region"  # a gang stays in one region by default
    assert not old.same_request(spec)


@pytest.mark.parametrize(("wire", "name"), [(pb.LOCALITY_NODE, "node"), (pb.LOCALITY_FABRIC, "fabric")])
def test_strict_node_and_fabric_localities_reach_placement(wire: int, name: str) -> None:
    spec = validate_submit(_gang(locality=wire))
    assert spec.locality == name and spec.domain_job("j").placement_locality == name
    with pytest.raises(InvalidSpec, match=r"^spec\.locality: applies only to a gang"):
        validate_submit(_gang(min_available=1, locality=wire))


def _models_request(*groups: list[str]) -> pb.SubmitJobRequest:
    request = _request()
    request.spec.ClearField("tasks")
    for i, models in enumerate(groups):
        resources = pb.ResourceRequest(cpu_milli=1000, gpu_count=1, gpu_milli=1000, gpu_models=models)
        request.spec.tasks.append(pb.TaskSpec(name=f"t{i}", resources=resources))
    return request


def test_gpu_models_of_the_catalogue_pass_without_asking_the_fleet() -> None:
    def fleet() -> frozenset[str]:
        raise AssertionError("the fleet is only asked about names the catalogue does not know")

    check_gpu_models(_models_request(["A100 80GB SXM", "A800"], ["T4"]).spec, default_catalogue(), fleet)


def test_an_unknown_gpu_model_names_its_field_and_the_models_that_exist() -> None:
    request = _models_request(["T4"], ["A10", "Quantum9000"])
    with pytest.raises(InvalidSpec) as info:
        check_gpu_models(request.spec, default_catalogue(), lambda: frozenset({"T4", "X1 Custom"}))
    assert info.value.field == "spec.tasks[1].resources.gpu_models[1]"
    message = str(info.value)
    assert message.startswith(
        "spec.tasks[1].resources.gpu_models[1]: unknown GPU model 'Quantum9000'; known models: H200, H100 SXM"
    ), message
    # every model of the catalogue, then what only the fleet reports
    assert all(m in message for m in default_catalogue().models)
    assert message.endswith(", X1 Custom")


def test_an_alias_is_refused_with_the_model_name_nodes_report() -> None:
    # The job-spec reference once named these: accepted, they matched no node and no quota, forever.
    request = _models_request(["A100-SXM4-80GB", "H100-SXM5-80GB"])
    with pytest.raises(InvalidSpec) as info:
        check_gpu_models(request.spec, default_catalogue(), frozenset)
    assert str(info.value).startswith(
        "spec.tasks[0].resources.gpu_models[0]: unknown GPU model 'A100-SXM4-80GB' "
        "(did you mean 'A100 80GB SXM'?); known models: "
    )


def test_a_model_only_the_fleet_reports_is_accepted() -> None:
    check_gpu_models(
        _models_request(["NVIDIA B200"]).spec, default_catalogue(), lambda: frozenset({"NVIDIA B200"})
    )
