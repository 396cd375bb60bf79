"""Jobs the fleet as it is can never run: a task that no node of the regions it may use could hold even
empty is UNSCHEDULABLE, decided before quota from the nodes alone, so the reason is the same every cycle
(whatever runs, whatever quota is left) and the job is placed once a node that can hold it joins."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.model import GpuDevice, Job, Node, TaskRequest
from suanli.scheduling.domain.network import LinkStatus, NetworkSnapshot, RegionLink
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import (
    ClusterState,
    FirstFitPlacer,
    NetworkConstraint,
    PendingReason,
    Placer,
    QueueSpec,
    QuotaExceeded,
    ReasonCode,
    ResourceQuota,
    Unschedulable,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, pending, running


def gpu_node(
    name: str, region: str, model: str, gpus: int, cpu: int = 32_000, memory: int = 131_072, **labels: str
) -> Node:
    devices = tuple(GpuDevice(i, model) for i in range(gpus))
    return Node(name, cpu, memory, devices, region=region, labels=tuple(sorted(labels.items())))


# Like deploy/fleets/small.yaml: A10 nodes have one GPU each, H100 only in washington-dc.
FLEET = (
    gpu_node("fra-a100-1", "frankfurt", "A100 80GB SXM", 8, cpu=128_000, memory=1_048_576, pool="training"),
    gpu_node("tok-a10-1", "tokyo", "A10", 1, pool="inference"),
    gpu_node("tok-a10-2", "tokyo", "A10", 1, pool="inference"),
    gpu_node("tok-t4-1", "tokyo", "T4", 2, cpu=104_000, memory=524_288, pool="inference"),
    gpu_node("wdc-h100-1", "washington-dc", "H100 SXM", 8, cpu=192_000, memory=2_097_152, pool="training"),
)
QUOTAS = {"gpu:A10": 4000, "gpu:H100 SXM": 8000, "gpu:A100 80GB SXM": 8000}
QUEUES = (QueueSpec("acme", tuple(ResourceQuota(flavour, amount) for flavour, amount in QUOTAS.items())),)
PLACERS: dict[str, Placer] = {
    "first-fit": FirstFitPlacer(),
    "fgdb": FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL),
}


def restricted(the_job: Job, **fields: Any) -> Job:
    """The job with every task's request changed by `fields` (regions, node_selector, ...)."""
    tasks = tuple(replace(t, request=replace(t.request, **fields)) for t in the_job.tasks)
    return replace(the_job, tasks=tasks)


def reason_of(state: ClusterState, job_id: str, placer: Placer) -> PendingReason | None:
    result = schedule_cycle(state, placer)
    assert job_id not in result.admitted
    return result.reason(job_id)


@pytest.fixture(params=sorted(PLACERS))
def placer(request: pytest.FixtureRequest) -> Placer:
    return PLACERS[request.param]


def test_four_tasks_of_four_a10_gpus_are_unschedulable_not_short_of_quota(placer: Placer) -> None:
    # 16 A10 GPUs asked, 4000 milli of A10 quota: quota is short too, but the structure is what to fix.
    big = job("big", "acme", tasks=4, gpus=4, models=("A10",))
    reason = reason_of(ClusterState(FLEET, QUEUES, pending=(pending(big, 1),)), "big", placer)
    assert isinstance(reason, Unschedulable)
    assert (reason.task, reason.resource, reason.requested, reason.largest, reason.node) == (
        "big-0",
        "gpu",
        "4",
        "1",
        "tok-a10-1",
    )
    assert reason.detail == "asks for 4 A10 GPUs on one node; the largest A10 node has 1 (tok-a10-1)"
    assert dict(reason.regions) == {
        "frankfurt": "no node has A10 GPUs (GPU models: A100 80GB SXM)",
        "tokyo": "asks for 4 A10 GPUs on one node; the largest A10 node has 1 (tok-a10-1)",
        "washington-dc": "no node has A10 GPUs (GPU models: H100 SXM)",
    }
    assert reason.message == (
        "task big-0 fits no node of the fleet, even an empty one: asks for 4 A10 GPUs on one node; the "
        "largest A10 node has 1 (tok-a10-1) (regions frankfurt, tokyo, washington-dc); it waits for a node "
        "that can hold it to join"
    )
    assert reason.as_dict() == {
        "code": "UNSCHEDULABLE",
        "message": reason.message,
        "task": "big-0",
        "resource": "gpu",
        "requested": "4",
        "largest": "1",
        "node": "tok-a10-1",
        "detail": reason.detail,
        "regions": [{"region": r, "verdict": v} for r, v in reason.regions],
    }


def test_a_model_absent_from_the_allowed_regions_says_so_every_cycle_whatever_quota_is_left(
    placer: Placer,
) -> None:
    # Before: NO_NODE_FITS while quota was free, QUOTA_EXCEEDED while another job used it up.
    h100 = restricted(job("h", "acme", gpus=2, models=("H100 SXM",)), regions=("tokyo",))
    quota_used = running(
        job("other", "acme", gpus=8, models=("H100 SXM",)), 1, ("wdc-h100-1", tuple(range(8)))
    )
    seen = []
    for busy in ((), (quota_used,), (), (quota_used,)):
        state = ClusterState(FLEET, QUEUES, busy, (pending(h100, 2),))
        seen.append(reason_of(state, "h", placer))
    assert all(r == seen[0] for r in seen), seen
    reason = seen[0]
    assert isinstance(reason, Unschedulable) and reason.code is ReasonCode.UNSCHEDULABLE
    assert (reason.resource, reason.requested, reason.largest) == ("gpu_model", "H100 SXM", "A10, T4")
    assert reason.regions == (("tokyo", "no node has H100 SXM GPUs (GPU models: A10, T4)"),)


@pytest.mark.parametrize(
    ("name", "request_", "resource", "detail"),
    [
        (
            "more CPU than any node",
            TaskRequest(cpu_milli=256_000, memory_mib=1024),
            "cpu",
            "asks for 256000 milli-CPU; the largest node has 192000 (wdc-h100-1)",
        ),
        (
            "more CPU than any node with the GPUs asked for",
            TaskRequest(cpu_milli=64_000, memory_mib=1024, gpu_count=1, gpu_milli=1000, gpu_models=("A10",)),
            "cpu",
            "asks for 64000 milli-CPU; the largest node with 1+ A10 GPUs has 32000 (tok-a10-1)",
        ),
        (
            "more memory than any node",
            TaskRequest(cpu_milli=1000, memory_mib=4_194_304),
            "memory",
            "asks for 4194304 MiB of memory; the largest node has 2097152 (wdc-h100-1)",
        ),
        (
            "more GPUs than any node",
            TaskRequest(cpu_milli=1000, gpu_count=16, gpu_milli=1000),
            "gpu",
            "asks for 16 GPUs on one node; the largest node has 8 (fra-a100-1)",
        ),
        (
            "labels no node has",
            TaskRequest(cpu_milli=1000, node_selector=(("pool", "batch"),)),
            "node_selector",
            "no node has the labels pool=batch",
        ),
        (
            "a region without nodes",
            TaskRequest(cpu_milli=1000, regions=("mars",)),
            "region",
            "no node in mars; regions with nodes: frankfurt, tokyo, washington-dc",
        ),
    ],
)
def test_each_resource_a_task_can_outgrow(
    name: str, request_: TaskRequest, resource: str, detail: str, placer: Placer
) -> None:
    the_job = replace(job("j", "acme"), tasks=(replace(job("j").tasks[0], request=request_),))
    reason = reason_of(ClusterState(FLEET, QUEUES, pending=(pending(the_job, 1),)), "j", placer)
    assert isinstance(reason, Unschedulable), reason
    assert (reason.resource, reason.detail) == (resource, detail)


def test_a_shared_gpu_needs_only_one_device() -> None:
    shared = job("s", "acme", gpus=1, milli=300, models=("A10",))
    result = schedule_cycle(ClusterState(FLEET, QUEUES, pending=(pending(shared, 1),)), FirstFitPlacer())
    assert result.admitted == ("s",)


def test_the_job_is_placed_once_a_node_that_can_hold_it_joins(placer: Placer) -> None:
    big = job("big", "acme", tasks=1, gpus=4, models=("A10",))
    before = reason_of(ClusterState(FLEET, QUEUES, pending=(pending(big, 1),)), "big", placer)
    assert isinstance(before, Unschedulable)
    grown = (*FLEET, gpu_node("tok-a10x4-1", "tokyo", "A10", 4))
    result = schedule_cycle(ClusterState(grown, QUEUES, pending=(pending(big, 1),)), placer)
    assert result.admitted == ("big",)
    assert {p.node_id for a in result.admissions for p in a.placements} == {"tok-a10x4-1"}


def test_a_possible_job_over_its_quota_is_still_quota_exceeded(placer: Placer) -> None:
    # 2 x 4 H100 fit the H100 node; the queue's 8000 milli is partly used, so quota is what is short.
    gang = job("g", "acme", tasks=2, gpus=4, models=("H100 SXM",))
    used = running(job("other", "acme", gpus=2, models=("H100 SXM",)), 1, ("wdc-h100-1", (0, 1)))
    reason = reason_of(ClusterState(FLEET, QUEUES, (used,), (pending(gang, 2),)), "g", placer)
    assert reason == QuotaExceeded("acme", "gpu:H100 SXM", 8000, 6000)


def test_a_gang_that_needs_only_some_tasks_runs_with_the_ones_that_fit() -> None:
    fits = TaskRequest(cpu_milli=1000, memory_mib=1024, gpu_count=1, gpu_milli=1000)
    never = replace(fits, gpu_count=16)
    base = job("e", "acme", tasks=3, gpus=1)
    elastic = replace(
        base,
        tasks=(
            replace(base.tasks[0], request=fits),
            replace(base.tasks[1], request=fits),
            replace(base.tasks[2], request=never),
        ),
        min_available=2,
    )
    queues = (QueueSpec("acme"),)
    result = schedule_cycle(ClusterState(FLEET, queues, pending=(pending(elastic, 1),)), FirstFitPlacer())
    assert result.admitted == ("e",)
    whole = replace(elastic, min_available=None)
    reason = schedule_cycle(
        ClusterState(FLEET, queues, pending=(pending(whole, 1),)), FirstFitPlacer()
    ).reason("e")
    assert isinstance(reason, Unschedulable) and reason.task == "e-2"


def test_a_region_the_network_rules_out_does_not_count_and_its_reason_is_given() -> None:
    # The only H100 node is in washington-dc, more than 50 ms from tokyo; tokyo itself has no H100.
    network = NetworkSnapshot(
        [
            RegionLink("washington-dc", "tokyo", 160.0, 0.0, None, LinkStatus.OK, last_probe_ms=1_000),
            RegionLink("frankfurt", "tokyo", 230.0, 0.0, None, LinkStatus.OK, last_probe_ms=1_000),
        ]
    )
    near = restricted(job("n", "acme", gpus=1, models=("H100 SXM",)), data_region="tokyo", max_rtt_ms=50.0)
    state = ClusterState(FLEET, QUEUES, pending=(pending(near, 1),), network=network)
    reason = schedule_cycle(state, FirstFitPlacer()).reason("n")
    assert isinstance(reason, Unschedulable) and reason.resource == "gpu_model"
    assert dict(reason.regions) == {
        "frankfurt": "RTT 230.0 ms to tokyo > max_rtt_ms 50",
        "tokyo": "no node has H100 SXM GPUs (GPU models: A10, T4)",
        "washington-dc": "RTT 160.0 ms to tokyo > max_rtt_ms 50",
    }
    # Every region ruled out: the network is the reason, as before.
    far = restricted(near, regions=("washington-dc",))
    reason = schedule_cycle(replace(state, pending=(pending(far, 1),)), FirstFitPlacer()).reason("n")
    assert isinstance(reason, NetworkConstraint)


def test_a_gang_task_whose_only_region_the_network_rules_out_has_nowhere_to_go() -> None:
    network = NetworkSnapshot(
        [RegionLink("frankfurt", "tokyo", 230.0, 0.0, None, LinkStatus.OK, last_probe_ms=1_000)]
    )
    base = restricted(job("g", "acme", tasks=2, gpus=0), data_region="tokyo", max_rtt_ms=50.0)
    gang = replace(
        base,
        tasks=(
            replace(base.tasks[0], request=replace(base.tasks[0].request, regions=("tokyo",))),
            replace(base.tasks[1], request=replace(base.tasks[1].request, regions=("frankfurt",))),
        ),
    )
    state = ClusterState(FLEET, QUEUES, pending=(pending(gang, 1),), network=network)
    reason = schedule_cycle(state, FirstFitPlacer()).reason("g")
    assert isinstance(reason, Unschedulable), reason
    assert (reason.task, reason.resource) == ("g-1", "region")
    assert reason.detail == (
        "no node in frankfurt that the network constraint allows (frankfurt ruled out); "
        "regions with nodes: frankfurt, tokyo, washington-dc"
    )
    assert reason.regions == (("frankfurt", "RTT 230.0 ms to tokyo > max_rtt_ms 50"),)
