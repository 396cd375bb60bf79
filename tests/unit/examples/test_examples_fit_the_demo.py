"""Every example job runs on what `suanli up` starts: its queue, priority class and GPU models exist in
deploy/scheduler/queues.yaml, and some node of the demo fleet satisfies every task's constraints.

An example that names a queue or a GPU model nobody has would sit pending forever in the demo."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.data import data_path
from suanli.jobspec import load_jobspec
from suanli.scheduling.service_layer.queues_config import QueueConfig, parse_queue_config
from suanli.sensing.adapters.fleet_file import load_fleet
from suanli.sensing.domain.fleet import FleetSpec, SimNodeSpec

REPO_ROOT = Path(__file__).resolve().parents[3]


EXAMPLES = sorted((REPO_ROOT / "examples" / "jobs").glob("*.yaml"))


@pytest.fixture(scope="module")
def queues() -> QueueConfig:
    return parse_queue_config((data_path("deploy/scheduler/queues.yaml")).read_text())


@pytest.fixture(scope="module")
def fleet() -> FleetSpec:
    return load_fleet(data_path("deploy/fleets/demo-3regions.yaml"))


def chain(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def gpu_models_with_quota(config: QueueConfig, queue: str) -> set[str]:
    names = set(chain(queue))
    return {
        quota.resource.removeprefix("gpu:")
        for spec in config.queues
        if spec.name in names
        for quota in spec.quotas
        if quota.resource.startswith("gpu:")
    }


def fits(node: SimNodeSpec, models: list[str], regions: list[str], selector: dict[str, str]) -> bool:
    identity = node.identity
    return (
        (not models or node.gpu_model in models)
        and (not regions or identity.region in regions)
        and all(identity.labels.get(k) == v for k, v in selector.items())
    )


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"training-gang.yaml", "inference-fractional.yaml", "cpu-batch.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_admissible_in_the_demo(path: Path, queues: QueueConfig, fleet: FleetSpec) -> None:
    spec = load_jobspec(path)
    assert spec.queue in {q.name for q in queues.queues}, f"{path.name}: queue {spec.queue} is not configured"
    if spec.priority_class:
        assert spec.priority_class in {c.name for c in queues.priority_classes}
    for task in spec.tasks:
        res = task.resources
        wants_gpu = res.gpu is not None and res.gpu.count > 0
        candidates = [n for n in fleet.nodes if (n.gpus > 0) == wants_gpu or not wants_gpu]
        if wants_gpu:
            allowed = gpu_models_with_quota(queues, spec.queue)
            candidates = [n for n in candidates if n.gpu_model in allowed and n.gpus >= res.gpu.count]
        matching = [n for n in candidates if fits(n, res.gpu_models, res.regions, dict(res.node_selector))]
        assert matching, f"{path.name}: no demo node can run task {task.name}"
