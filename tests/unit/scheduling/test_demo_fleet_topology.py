"""Gang topology and CPU pools on the demo fleet (deploy/fleets/demo-3regions.yaml), through the queueing
cycle and the framework placer the service runs (fgdb): a 4 x 1-GPU gang lands on one node, a gang that
needs its fabric keeps to one fabric domain, and no CPU-only task runs on a GPU node while the CPU-only
nodes have room."""

from __future__ import annotations

import pytest

from suanli.data import data_path
from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.model import GpuDevice, Job, Locality, Node, Task, TaskRequest
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import ClusterState, schedule_cycle
from suanli.scheduling.domain.queueing.testing import pending, queue
from suanli.sensing.adapters.fleet_file import load_fleet

A100 = "A100 80GB SXM"


@pytest.fixture(scope="module")
def fleet() -> tuple[Node, ...]:
    spec = load_fleet(data_path("deploy/fleets/demo-3regions.yaml"))
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
        for n in spec.nodes
    )


def cycle(nodes: tuple[Node, ...], *jobs: Job) -> dict[str, list[str]]:
    """Node ids of each admitted job's tasks after one cycle of the service's placer."""
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, seed=1)
    work = tuple(pending(job, seq) for seq, job in enumerate(jobs, 1))
    result = schedule_cycle(ClusterState(nodes, (queue("q"),), pending=work), placer)
    return {a.job_id: [p.node_id for p in a.placements] for a in result.admissions}


def gang(name: str, size: int, request: TaskRequest, locality: Locality | None = None) -> Job:
    return Job(name, "q", tuple(Task(f"{name}-{i}", request) for i in range(size)), locality=locality)


def test_a_4_gpu_ddp_gang_lands_on_one_node(fleet: tuple[Node, ...]) -> None:
    a100 = TaskRequest(cpu_milli=8000, memory_mib=65536, gpu_count=1, gpu_milli=1000, gpu_models=(A100,))
    anywhere = TaskRequest(cpu_milli=8000, memory_mib=65536, gpu_count=1, gpu_milli=1000)
    placed = cycle(fleet, gang("ddp", 4, a100), gang("any", 4, anywhere))
    assert len(set(placed["ddp"])) == 1 and placed["ddp"][0].startswith("fra1-a100-")
    assert len(set(placed["any"])) == 1


def test_a_gang_bigger_than_a_node_stays_in_one_fabric_domain(fleet: tuple[Node, ...]) -> None:
    h100 = TaskRequest(cpu_milli=16000, memory_mib=131072, gpu_count=8, gpu_milli=1000)
    placed = cycle(fleet, gang("big", 6, h100), gang("strict", 4, h100, Locality.FABRIC))
    by_id = {n.id: n for n in fleet}

    def domains(job: str) -> set[tuple[str, str | None]]:
        return {(by_id[n].zone, by_id[n].label("fabric")) for n in placed[job]}

    assert len(set(placed["big"])) == 6 and len(domains("big")) == 1
    assert len(domains("strict")) == 1 and None not in {f for _, f in domains("strict")}


def test_no_cpu_only_task_runs_on_a_gpu_node_while_cpu_only_nodes_have_room(fleet: tuple[Node, ...]) -> None:
    cpu_nodes = {n.id for n in fleet if not n.gpus}
    cores = sum(n.cpu_milli for n in fleet if not n.gpus) // 1000
    batch = TaskRequest(cpu_milli=8000, memory_mib=16384)
    room = cores // 8  # the CPU-only nodes hold exactly this many; 20 more must go elsewhere
    jobs = [gang(f"cpu{i}", 1, batch) for i in range(room + 20)]
    placed = cycle(fleet, *jobs)
    where = [placed[j.id][0] for j in jobs]
    on_cpu = [w in cpu_nodes for w in where]
    assert len(where) == room + 20 and sum(on_cpu) == room
    # In admission order: every task went to a CPU-only node until they were full.
    assert on_cpu == [True] * room + [False] * 20
