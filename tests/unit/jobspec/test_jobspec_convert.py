"""Conversion to the wire's JobSpec and back; the shipped examples validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import document_from_proto, from_proto, load_jobspec, parse_jobspec, to_document, to_proto

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "jobs"

FULL = """
name: mixed
queue: acme/vision
kind: inference
priority_class: serving
best_effort: true
max_retries: 3
labels: {app: chat}
min_available: 2
tasks:
  - name: whole
    replicas: 2
    resources: {cpu: 2500m, memory: 24Gi, gpu: 2, gpu_models: [A100, H100], regions: [cn-east],
                node_selector: {nvlink: "true"}}
    command: python -m serve
    args: [--port, "8080"]
    env: {PORT: "8080"}
    duration: 1h30m
  - name: shared
    resources: {gpu: {count: 1, milli: 300, memory: 10Gi}}
    duration: 2.5
"""


def test_to_proto_carries_every_field() -> None:
    message = to_proto(parse_jobspec(FULL))
    assert (message.name, message.queue, message.kind) == ("mixed", "acme/vision", pb.JOB_KIND_INFERENCE)
    assert (message.priority_class, message.best_effort, message.max_retries) == ("serving", True, 3)
    assert message.HasField("preemptible") and message.preemptible
    assert (message.min_available, dict(message.labels)) == (2, {"app": "chat"})
    whole, shared = message.tasks
    assert (whole.name, whole.replicas, whole.command, list(whole.args)) == (
        "whole",
        2,
        "python -m serve",
        ["--port", "8080"],
    )
    assert (dict(whole.env), whole.duration_s) == ({"PORT": "8080"}, 5400.0)
    r = whole.resources
    assert (r.cpu_milli, r.memory_mib, r.gpu_count, r.gpu_milli, r.gpu_memory_mib) == (
        2500,
        24576,
        2,
        1000,
        0,
    )
    assert (list(r.gpu_models), list(r.regions), dict(r.node_selector)) == (
        ["A100", "H100"],
        ["cn-east"],
        {"nvlink": "true"},
    )
    s = shared.resources
    assert (s.cpu_milli, s.memory_mib, s.gpu_count, s.gpu_milli, s.gpu_memory_mib) == (
        1000,
        1024,
        1,
        300,
        10240,
    )
    assert shared.duration_s == 2.5


@pytest.mark.parametrize("source", [FULL, "name: t\nqueue: q\ntasks: [{name: w, resources: {gpu: 0.3}}]"])
def test_round_trip(source: str) -> None:
    spec = parse_jobspec(source)
    assert from_proto(to_proto(spec)) == spec
    # And through the bytes on the wire.
    assert from_proto(pb.JobSpec.FromString(to_proto(spec).SerializeToString())) == spec


def test_unset_preemptible_on_the_wire_reads_as_true() -> None:
    message = pb.JobSpec(
        name="t",
        queue="q",
        tasks=[pb.TaskSpec(name="w", resources=pb.ResourceRequest(cpu_milli=1000, memory_mib=1024))],
    )
    assert not message.HasField("preemptible")
    assert from_proto(message).preemptible is True
    message.preemptible = False
    assert from_proto(message).preemptible is False


def test_unspecified_kind_reads_as_batch() -> None:
    message = pb.JobSpec(name="t", queue="q", tasks=[pb.TaskSpec(name="w")])
    assert from_proto(message).kind == "batch"


def test_document_is_written_in_human_units() -> None:
    document = to_document(parse_jobspec(FULL))
    whole, shared = document["tasks"]
    assert whole["resources"]["cpu"] == "2500m"
    assert whole["resources"]["memory"] == "24Gi"
    assert whole["resources"]["gpu"] == 2
    assert whole["duration"] == "1h30m"
    assert shared["resources"]["gpu"] == {"count": 1, "milli": 300, "memory": "10Gi"}
    assert "command" not in shared  # unset values are left out
    assert document_from_proto(to_proto(parse_jobspec(FULL))) == document


def test_shared_gpu_without_memory_prints_as_shorthand() -> None:
    spec = parse_jobspec("name: t\nqueue: q\ntasks: [{name: w, resources: {gpu: {milli: 300}}}]")
    assert to_document(spec)["tasks"][0]["resources"]["gpu"] == 0.3


@pytest.mark.parametrize(
    ("name", "tasks", "gpu_milli_each", "min_available"),
    [
        ("training-gang.yaml", 4, 1000, 4),
        ("inference-fractional.yaml", 3, 300, 0),
        ("cpu-batch.yaml", 9, 0, 0),
    ],
)
def test_examples_validate(name: str, tasks: int, gpu_milli_each: int, min_available: int) -> None:
    spec = load_jobspec(EXAMPLES / name)
    assert spec.task_count == tasks
    assert {t.resources.gpu_count * t.resources.gpu_milli for t in spec.tasks} == {gpu_milli_each}
    assert spec.min_available == min_available
    assert from_proto(to_proto(spec)) == spec


def test_every_example_is_tested() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == [
        "cpu-batch.yaml",
        "inference-fractional.yaml",
        "training-gang.yaml",
    ]


NETWORK = (
    "name: t\nqueue: q\ndata_region: tokyo\nmax_rtt_ms: 40\nlocality: any\nmin_bandwidth_gbps: 2.5\n"
    "tasks: [{name: w, replicas: 4, resources: {gpu: 1}}]"
)


def test_network_fields_cross_the_wire_and_back() -> None:
    spec = parse_jobspec(NETWORK)
    message = to_proto(spec)
    assert (message.data_region, message.max_rtt_ms, message.locality) == ("tokyo", 40.0, pb.LOCALITY_ANY)
    assert message.min_bandwidth_gbps == 2.5
    assert from_proto(pb.JobSpec.FromString(message.SerializeToString())) == spec
    document = to_document(spec)
    assert (document["data_region"], document["max_rtt_ms"], document["locality"]) == ("tokyo", 40.0, "any")


def test_a_spec_without_network_fields_sends_none() -> None:
    message = to_proto(parse_jobspec("name: t\nqueue: q\ntasks: [{name: w}]"))
    assert not message.HasField("max_rtt_ms") and not message.HasField("min_bandwidth_gbps")
    assert (message.data_region, message.locality) == ("", pb.LOCALITY_UNSPECIFIED)
    assert "locality" not in document_from_proto(message)


@pytest.mark.parametrize(("name", "wire"), [("node", pb.LOCALITY_NODE), ("fabric", pb.LOCALITY_FABRIC)])
def test_node_and_fabric_localities_cross_the_wire_and_back(name: str, wire: int) -> None:
    spec = parse_jobspec(
        f"name: t\nqueue: q\nlocality: {name}\ntasks: [{{name: w, replicas: 4, resources: {{gpu: 1}}}}]"
    )
    message = to_proto(spec)
    assert message.locality == wire
    assert from_proto(pb.JobSpec.FromString(message.SerializeToString())) == spec
    assert to_document(spec)["locality"] == name and document_from_proto(message)["locality"] == name
