"""Every example job runs on what `suanli up` starts: its queue, priority class and GPU models exist in
deploy/scheduler/queues.yaml, and some node of the demo fleet satisfies every task's constraints.

An example that names a queue or a GPU model nobody has would sit pending forever in the demo. The
examples of examples/jobs and every job in a YAML block of the README and docs/ (docs/jobspec.md's
reference first, then jobs inside wrappers such as the demo workload's templates) also go
through the scheduler's own path: SubmitJob's checks, then one cycle on the empty demo fleet, which places
them or leaves them waiting for quota only. The replica jobs of every service spec in a YAML block of the
docs (docs/inference.md's reference) pass SubmitJob's checks, made by the path `suanli service create`
takes: the spec text through CreateService's parser and the serving use case."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.clock import ManualClock
from suanli.contracts import decode
from suanli.data import data_path
from suanli.jobspec import JobSpec, load_jobspec, to_proto, validate_document
from suanli.resources import default_catalogue
from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.model import GpuDevice, Node
from suanli.scheduling.domain.network import NetworkSnapshot, RegionLink
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import ClusterState, CycleConfig, ReasonCode, Workload, schedule_cycle
from suanli.scheduling.entrypoints.validation import check_gpu_models, validate_submit
from suanli.scheduling.service_layer.queues_config import QueueConfig, parse_queue_config
from suanli.sensing.adapters.fleet_file import load_fleet
from suanli.sensing.domain.fleet import FleetSpec, SimNodeSpec
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.domain.service import ReplicaPolicy
from suanli.serving.service_layer.serving import ServingService, parse_document

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


# -- the same examples through the scheduler's own path -------------------------------------------------

DOC_BLOCKS = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


OTHER_DOCS = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
DOCS = [REPO_ROOT / "docs" / "jobspec.md", *sorted(p for p in OTHER_DOCS if p.name != "jobspec.md")]


def job_documents(value: object) -> list[dict[str, object]]:
    """The job specs in a YAML document: the document itself, or one a wrapper holds (the demo
    workload's `spec:`, a what-if file's `job:`), at any depth."""
    if isinstance(value, dict):
        if "tasks" in value and "queue" in value:
            return [value]
        return [job for v in value.values() for job in job_documents(v)]
    if isinstance(value, list):
        return [job for v in value for job in job_documents(v)]
    return []


def doc_examples() -> list[tuple[str, JobSpec]]:
    """Every job in a YAML block of the README and docs/ (docs/jobspec.md's reference first), named by
    its file, the block and its place in it."""
    out = []
    for doc in DOCS:
        for b, block in enumerate(DOC_BLOCKS.findall(doc.read_text())):
            for d, document in enumerate(yaml.safe_load_all(block)):
                for j, job in enumerate(job_documents(document)):
                    out.append((f"{doc.name}-{b}-{d}-{j}-{job['name']}", validate_document(job)))
    return out


def service_blocks() -> list[tuple[str, str]]:
    """Every service spec (one document with `model` and `min_replicas`) in a YAML block of the README
    and docs/, as text, named by its file and block."""
    found = []
    for doc in DOCS:
        for b, block in enumerate(DOC_BLOCKS.findall(doc.read_text())):
            documents = list(yaml.safe_load_all(block))
            spec = documents[0] if len(documents) == 1 else None
            if isinstance(spec, dict) and {"model", "min_replicas"} <= spec.keys():
                found.append((f"{doc.name}-{b}", block))
    return found


async def replica_jobs(text: str, regions: set[str]) -> list[dict[str, object]]:
    """The jobs `suanli service create -f` would have the scheduler run for the spec `text` (its
    min_replicas), made as CreateService makes them; the spec is checked against the demo's regions."""
    clock = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))
    ids = itertools.count(1)
    store = InMemoryServing(clock, lambda: uuid.UUID(int=next(ids)))
    service = ServingService(default_catalogue(), ReplicaPolicy(), lambda: "svc-1", known_regions=regions)
    async with store.begin() as unit:
        await service.create(unit, "", parse_document(text), 0, "")
    records = [decode(r.value) for r in await store.store.pending_outbox(10_000)]
    return [json.loads(body["spec"]) for name, body in records if name == "JobSubmissionRequested"]


def service_examples() -> list[tuple[str, JobSpec]]:
    fleet = load_fleet(data_path("deploy/fleets/demo-3regions.yaml"))
    regions = {n.identity.region for n in fleet.nodes}
    return [
        (f"{name}-replica-{r}", validate_document(job))
        for name, text in service_blocks()
        for r, job in enumerate(asyncio.run(replica_jobs(text, regions)), 1)
    ]


def file_examples() -> list[tuple[str, JobSpec]]:
    return [(p.stem, load_jobspec(p)) for p in EXAMPLES]


def demo_nodes(fleet: FleetSpec) -> tuple[Node, ...]:
    return tuple(
        Node(
            n.identity.node_id,
            n.cpu_cores * 1000,
            n.memory_mib,
            tuple(GpuDevice(i, n.gpu_model or "", n.gpu_memory_mib) for i in range(n.gpus)),
            n.identity.region,
            n.identity.zone,
            tuple(sorted(n.identity.labels.items())),
        )
        for n in fleet.nodes
    )


def demo_network(fleet: FleetSpec) -> NetworkSnapshot:
    """The fleet's link model between one site of each region, as the routing view would publish it."""
    sites = {s.region: s for s in reversed(fleet.sites)}
    links = []
    for src, a in sites.items():
        for dst, b in sites.items():
            if src != dst:
                p = fleet.links.profile(a, b)
                links.append(RegionLink(src, dst, p.rtt_ms, p.loss_ratio, p.bandwidth_mbps, last_probe_ms=1))
    return NetworkSnapshot(links)


def test_the_reference_and_every_doc_example_are_found() -> None:
    names = [name for name, _ in doc_examples()]
    assert names[0] == "jobspec.md-0-0-0-resnet50-ddp" and len(names) >= 7, names
    # The jobs inside the demo workload's and the what-if file's wrappers count too.
    assert {n.split("-", 1)[0] for n in names} >= {"jobspec.md", "demo.md", "simulate.md"}, names


@pytest.mark.parametrize(("name", "spec"), service_examples(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_doc_service_makes_replica_jobs_the_scheduler_accepts(
    name: str, spec: JobSpec, fleet: FleetSpec
) -> None:
    """SubmitJob's checks, GPU models against the catalogue and the demo fleet's; not a demo cycle: the
    reference spec is sized for the simulator's trace (docs/inference.md), not for the demo's quotas."""
    request = pb.SubmitJobRequest(spec=to_proto(spec))
    validate_submit(request)
    check_gpu_models(
        request.spec, default_catalogue(), lambda: {n.gpu_model for n in fleet.nodes if n.gpu_model}
    )
    assert spec.kind == "inference" and len(spec.tasks) == 1, name


def test_the_service_spec_reference_is_found_and_makes_its_min_replicas() -> None:
    assert [name for name, _ in service_blocks()] == ["inference.md-0"]
    [(_, text)] = service_blocks()
    names = [name for name, _ in service_examples()]
    assert names == [
        f"inference.md-0-replica-{r}" for r in range(1, yaml.safe_load(text)["min_replicas"] + 1)
    ]


@pytest.mark.parametrize(
    ("name", "spec"),
    file_examples() + doc_examples(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_example_is_accepted_and_possible_on_the_empty_demo(
    name: str, spec: JobSpec, queues: QueueConfig, fleet: FleetSpec
) -> None:
    """Submitted as SubmitJob checks it (GPU models against the catalogue and the fleet), then one cycle on
    the empty demo fleet: placed, or waiting only for quota, never refused or impossible."""
    request = pb.SubmitJobRequest(spec=to_proto(spec))
    accepted = validate_submit(request)
    nodes = demo_nodes(fleet)
    check_gpu_models(request.spec, default_catalogue(), lambda: {n.gpu_model for n in nodes if n.gpu_model})
    job_id = "j-example"
    accepted = replace(
        accepted, tasks=tuple(replace(t, task_id=f"{job_id}-{t.name}") for t in accepted.tasks)
    )
    network = demo_network(fleet)
    state = ClusterState(
        nodes,
        queues.queues,
        pending=(Workload(accepted.domain_job(job_id), 1, accepted.priority_class or None),),
        network=network,
    )
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=network)
    result = schedule_cycle(state, placer, CycleConfig(priority_classes=queues.priority_classes))
    reason = result.reason(job_id)
    assert result.admitted == (job_id,) or (
        reason is not None and reason.code is ReasonCode.QUOTA_EXCEEDED
    ), f"{name}: {reason.message if reason else 'not admitted'}"
