"""The job spec model: what it accepts, and the exact `path: message` of every rule it enforces."""

from __future__ import annotations

from typing import Any

import pytest

from suanli.jobspec import JobSpec, JobSpecError, parse_jobspec, validate_document


def doc(task: dict[str, Any] | None = None, **job: Any) -> dict[str, Any]:
    """A minimal valid document, with the first task and top-level fields overridden."""
    return {"name": "train", "queue": "acme/vision", "tasks": [{"name": "worker", **(task or {})}], **job}


NAME_RULE = (
    "lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit"
)
MEMORY_RULE = 'must be an amount with a unit, Ki/Mi/Gi/Ti or k/M/G/T, e.g. "16Gi"'


def problems(document: Any) -> list[str]:
    with pytest.raises(JobSpecError) as caught:
        validate_document(document)
    return list(caught.value.problems)


def test_defaults_of_a_minimal_spec() -> None:
    spec = validate_document(doc())
    assert (spec.kind, spec.priority_class, spec.preemptible, spec.best_effort) == ("batch", "", True, False)
    assert (spec.min_available, spec.max_retries, spec.labels) == (0, 0, {})
    task = spec.tasks[0]
    assert (task.replicas, task.command, task.args, task.env, task.duration_s) == (1, "", [], {}, 0.0)
    resources = task.resources
    assert (resources.cpu_milli, resources.memory_mib, resources.gpu) == (1000, 1024, None)
    assert (resources.gpu_count, resources.gpu_milli, resources.gpu_memory_mib) == (0, 0, 0)


@pytest.mark.parametrize(
    ("gpu", "count", "milli", "memory_mib"),
    [
        (0.3, 1, 300, 0),
        (0.25, 1, 250, 0),
        (2, 2, 1000, 0),
        (1.0, 1, 1000, 0),
        (0, 0, 0, 0),
        ({"count": 4}, 4, 1000, 0),
        ({"milli": 500}, 1, 500, 0),
        ({"count": 1, "milli": 300, "memory": "10Gi"}, 1, 300, 10240),
    ],
)
def test_gpu_forms(gpu: Any, count: int, milli: int, memory_mib: int) -> None:
    resources = validate_document(doc({"resources": {"gpu": gpu}})).tasks[0].resources
    assert (resources.gpu_count, resources.gpu_milli, resources.gpu_memory_mib) == (count, milli, memory_mib)


def test_scalars_in_env_labels_selector_and_args_become_strings() -> None:
    spec = validate_document(
        doc(
            {
                "env": {"PORT": 8080, "DEBUG": True, "RATIO": 0.5},
                "args": ["--epochs", 90],
                "resources": {"node_selector": {"nvlink": True}},
            },
            labels={"tier": 1},
        )
    )
    task = spec.tasks[0]
    assert task.env == {"PORT": "8080", "DEBUG": "true", "RATIO": "0.5"}
    assert task.args == ["--epochs", "90"]
    assert task.resources.node_selector == {"nvlink": "true"}
    assert spec.labels == {"tier": "1"}


def test_full_spec() -> None:
    spec = validate_document(
        doc(
            {
                "replicas": 4,
                "resources": {
                    "cpu": "8",
                    "memory": "64Gi",
                    "gpu": 1,
                    "gpu_models": ["A100"],
                    "regions": ["cn-east", "cn-north"],
                },
                "command": "torchrun train.py",
                "duration": "2h",
            },
            kind="training",
            priority_class="high",
            preemptible=False,
            min_available=4,
            max_retries=2,
            labels={"team": "vision"},
        )
    )
    assert spec.task_count == 4
    assert spec.tasks[0].resources.regions == ["cn-east", "cn-north"]
    assert spec.tasks[0].duration_s == 7200.0
    assert not spec.preemptible


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "spec: must be a mapping (got [])"),
        ({"queue": "a", "tasks": [{"name": "w"}]}, "name: required"),
        (doc(replica=2), "replica: unknown field"),
        (doc({"resource": {}}), "tasks[0].resource: unknown field"),
        (doc(name="Train"), f"name: must be a name of {NAME_RULE} (got 'Train')"),
        (doc(name="a" * 64), f"name: must be a name of {NAME_RULE} (got '{'a' * 64}')"),
        (
            doc(queue="acme//x"),
            "queue: must be a queue path like 'tenant' or 'tenant/team': segments of "
            "lowercase letters, digits, '-' and '_' separated by '/', at most 253 characters (got 'acme//x')",
        ),
        (doc(kind="serving"), "kind: must be one of 'training', 'inference', 'batch' (got 'serving')"),
        (
            doc(priority_class="High!"),
            f"priority_class: must be a priority class name of {NAME_RULE} (got 'High!')",
        ),
        (doc(preemptible="maybe"), "preemptible: must be true or false (got 'maybe')"),
        (doc(best_effort=True, preemptible=False), "preemptible: must be true when best_effort is true"),
        (doc(max_retries=101), "max_retries: must be 0..100 (got 101)"),
        (doc(max_retries="x"), "max_retries: must be an integer (got 'x')"),
        (doc(labels={"bad key": "v"}), "labels: 'bad key' is not a valid label key"),
        (doc(labels=["a"]), "labels: must be a mapping (got ['a'])"),
        (doc(tasks=[]), "tasks: must list at least one task"),
        (doc(tasks="worker"), "tasks: must be a list (got 'worker')"),
        (doc(tasks=[{"name": "w"}, {"name": "w"}]), "tasks: duplicate task name w"),
        (doc(min_available=2), "min_available: must be 0..1 (got 2)"),
        (doc(min_available=-1), "min_available: must be 0..1 (got -1)"),
        ({"name": "t", "queue": "q", "tasks": [{}]}, "tasks[0].name: required"),
        (doc({"name": "w_1"}), f"tasks[0].name: must be a name of {NAME_RULE} (got 'w_1')"),
        (doc({"replicas": 0}), "tasks[0].replicas: must be 1..1000 (got 0)"),
        (
            doc({"resources": {"cpu": "4x"}}),
            'tasks[0].resources.cpu: must be cores ("4", 0.5) or milli-cores ("500m") (got \'4x\')',
        ),
        (doc({"resources": {"cpu": "0"}}), "tasks[0].resources.cpu: must be > 0 (got '0')"),
        (doc({"resources": {"memory": 16}}), f"tasks[0].resources.memory: {MEMORY_RULE} (got 16)"),
        (
            doc({"resources": {"gpu": {"count": 1, "milli": 1500}}}),
            "tasks[0].resources.gpu.milli: must be 1..1000 (got 1500)",
        ),
        (
            doc({"resources": {"gpu": {"count": 1, "milli": 0}}}),
            "tasks[0].resources.gpu.milli: must be 1..1000 (got 0)",
        ),
        (
            doc({"resources": {"gpu": {"count": 2, "milli": 300}}}),
            "tasks[0].resources.gpu.milli: below 1000 (a shared GPU) only with count 1 (got count 2)",
        ),
        (doc({"resources": {"gpu": {"count": 0}}}), "tasks[0].resources.gpu.count: must be 1..64 (got 0)"),
        (doc({"resources": {"gpu": {"count": 65}}}), "tasks[0].resources.gpu.count: must be 1..64 (got 65)"),
        (
            doc({"resources": {"gpu": {"count": 1, "memory": "lots"}}}),
            f"tasks[0].resources.gpu.memory: {MEMORY_RULE} (got 'lots')",
        ),
        (
            doc({"resources": {"gpu": 1.5}}),
            "tasks[0].resources.gpu: must be a whole number of GPUs or a fraction of one GPU below 1 (got 1.5)",  # noqa: E501
        ),
        (
            doc({"resources": {"gpu": 0.3333}}),
            "tasks[0].resources.gpu: a GPU fraction must be a whole number of milli-GPU, e.g. 0.25 "
            "(got 0.3333)",
        ),
        (doc({"resources": {"gpu": "half"}}), "tasks[0].resources.gpu: must be a mapping (got 'half')"),
        (
            doc({"resources": {"gpu_models": ["A100", "A100"]}}),
            "tasks[0].resources.gpu_models: duplicate GPU model A100",
        ),
        (doc({"resources": {"regions": [""]}}), "tasks[0].resources.regions: region must not be empty"),
        (
            doc({"resources": {"node_selector": {"a b": "x"}}}),
            "tasks[0].resources.node_selector: 'a b' is not a valid label key",
        ),
        (
            doc({"command": "echo 'x"}),
            "tasks[0].command: cannot be split into words like a shell would: "
            'No closing quotation (got "echo \'x")',
        ),
        (doc({"args": "--fast"}), "tasks[0].args: must be a list (got '--fast')"),
        (doc({"env": {"1PORT": "1"}}), "tasks[0].env: '1PORT' is not a valid environment variable name"),
        (
            doc({"duration": "5q"}),
            'tasks[0].duration: must be like "90s", "5m", "1h30m" or a number of seconds (got \'5q\')',
        ),
        (doc({"duration": -1}), "tasks[0].duration: must be >= 0 (got -1)"),
    ],
)
def test_every_rule_names_the_field(document: Any, expected: str) -> None:
    assert problems(document) == [expected]


def test_all_problems_are_reported_at_once() -> None:
    found = problems(
        doc(
            {"replicas": 0, "resources": {"gpu": {"count": 2, "milli": 1500}}},
            kind="x",
            extra=1,
        )
    )
    assert found == [
        "kind: must be one of 'training', 'inference', 'batch' (got 'x')",
        "tasks[0].replicas: must be 1..1000 (got 0)",
        "tasks[0].resources.gpu.milli: must be 1..1000 (got 1500)",
        "extra: unknown field",
    ]


def test_gang_counts_replicas() -> None:
    spec = validate_document(
        doc({"replicas": 3}, tasks=[{"name": "a", "replicas": 3}, {"name": "b"}], min_available=4)
    )
    assert (spec.task_count, spec.min_available) == (4, 4)


def test_queue_override_replaces_or_supplies_the_queue() -> None:
    assert parse_jobspec("name: t\nqueue: a\ntasks: [{name: w}]", queue="b/c").queue == "b/c"
    assert parse_jobspec("name: t\ntasks: [{name: w}]", queue="b").queue == "b"


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(JobSpecError) as caught:
        parse_jobspec("name: t\ntasks: [\n  {name: w\n", source="job.yaml")
    assert caught.value.source == "job.yaml"
    [problem] = caught.value.problems
    assert problem.startswith("line 4, column 1: not valid YAML:")


def test_unreadable_file(tmp_path: Any) -> None:
    from suanli.jobspec import load_jobspec

    with pytest.raises(JobSpecError) as caught:
        load_jobspec(tmp_path / "missing.yaml")
    assert caught.value.problems == ("cannot read: No such file or directory",)


def test_specs_are_immutable() -> None:
    spec = validate_document(doc())
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]
    assert isinstance(spec, JobSpec)


# -- network-aware placement ---------------------------------------------------------------------------

GANG = {"replicas": 4}


def test_network_fields_default_to_what_old_clients_sent() -> None:
    spec = validate_document(doc())
    assert (spec.data_region, spec.max_rtt_ms, spec.locality, spec.min_bandwidth_gbps) == (
        "",
        None,
        None,
        None,
    )


def test_network_fields_are_accepted_on_a_gang() -> None:
    spec = validate_document(
        doc(GANG, data_region="tokyo", max_rtt_ms=40, locality="any", min_bandwidth_gbps=2.5)
    )
    assert (spec.data_region, spec.max_rtt_ms, spec.locality, spec.min_bandwidth_gbps) == (
        "tokyo",
        40,
        "any",
        2.5,
    )
    assert spec.gang_size == 4
    assert validate_document(doc(data_region="tokyo", max_rtt_ms=0)).max_rtt_ms == 0


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            doc(max_rtt_ms=30),
            "max_rtt_ms: needs data_region: the round-trip time is measured to the data region",
        ),
        (doc(data_region="tokyo", max_rtt_ms=-5), "max_rtt_ms: must be a number >= 0 (got -5.0)"),
        (doc(data_region="tokyo", max_rtt_ms="far"), "max_rtt_ms: must be a number (got 'far')"),
        (
            doc(data_region=" tokyo"),
            "data_region: must be a region name of at most 63 characters without surrounding spaces "
            "(got ' tokyo')",
        ),
        (
            doc(locality="region"),
            "locality: applies only to a gang (2 or more tasks placed together); this job places 1 together",
        ),
        (
            doc(GANG, min_available=1, locality="zone"),
            "locality: applies only to a gang (2 or more tasks placed together); this job places 1 together",
        ),
        (
            doc(GANG, locality="planet"),
            "locality: must be one of 'node', 'fabric', 'zone', 'region', 'any' (got 'planet')",
        ),
        (
            doc(GANG, locality="region", min_bandwidth_gbps=10),
            "min_bandwidth_gbps: only with locality 'any' (a gang in one region or zone shares its network)",
        ),
        (
            doc(GANG, locality="any", min_bandwidth_gbps=0),
            "min_bandwidth_gbps: must be a number > 0 (got 0.0)",
        ),
    ],
)
def test_every_network_rule_names_the_field(document: Any, expected: str) -> None:
    assert problems(document) == [expected]
