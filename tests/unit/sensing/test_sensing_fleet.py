"""Fleet files expand deterministically; the simulated load and link models are seeded and follow tasks."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from suanli.data import data_path
from suanli.resources import default_catalogue
from suanli.sensing.adapters.fleet_file import load_fleet
from suanli.sensing.adapters.randomness import SeededRandom
from suanli.sensing.adapters.simulated import SimulatedCollector
from suanli.sensing.domain.fleet import GROUP_LABEL, FleetError, parse_fleet
from suanli.sensing.domain.links import LinkModel, LinkProfile, SiteRef, summarise
from suanli.sensing.domain.placement import DeviceShare, Placement
from suanli.sensing.domain.simulation import SimulatedNodeModel, busy_factor, device_uuid
from suanli.sensing.domain.tasks import TaskTable

FLEETS = data_path("deploy/fleets")

DOC: dict[str, Any] = {
    "name": "t",
    "seed": 5,
    "regions": [
        {
            "name": "r1",
            "sites": [
                {
                    "name": "s1",
                    "zone": "z1",
                    "node_groups": [
                        {
                            "name": "h",
                            "count": 2,
                            "gpu_model": "H200",
                            "gpus_per_node": 8,
                            "cpu_cores": 64,
                            "memory_gib": 512,
                            "labels": {"pool": "train"},
                        },
                        {"name": "c", "count": 1, "cpu_cores": 16, "memory_gib": 64},
                    ],
                }
            ],
        },
        {
            "name": "r2",
            "sites": [
                {
                    "name": "s2",
                    "node_groups": [
                        {"name": "t4", "count": 3, "gpu_model": "T4", "gpus_per_node": 2},
                    ],
                }
            ],
        },
    ],
    "network": {"region_pairs": [{"regions": ["r1", "r2"], "rtt_ms": 30, "jitter_ms": 2}]},
}


def test_counts_expand_into_named_nodes_in_file_order() -> None:
    fleet = parse_fleet(DOC, default_catalogue())
    assert [n.identity.node_id for n in fleet.nodes] == [
        "s1-h-001",
        "s1-h-002",
        "s1-c-001",
        "s2-t4-001",
        "s2-t4-002",
        "s2-t4-003",
    ]
    first = fleet.nodes[0]
    assert (first.identity.region, first.identity.zone, first.identity.site) == ("r1", "z1", "s1")
    assert first.identity.labels == {"pool": "train", GROUP_LABEL: "h"}
    assert (first.gpus, first.gpu_model, first.gpu_memory_mib, first.cpu_cores, first.memory_mib) == (
        8,
        "H200",
        141 * 1024,
        64,
        512 * 1024,
    )
    assert fleet.nodes[2].gpus == 0 and fleet.nodes[2].gpu_model is None
    assert fleet.nodes[3].identity.zone == "r2-s2"  # zone defaults from region and site
    assert fleet.regions == ("r1", "r2")
    assert parse_fleet(copy.deepcopy(DOC), default_catalogue()) == fleet


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("regions", 0, "sites", 0, "node_groups", 0, "count"), -1, "node_groups[0].count"),
        (("regions", 0, "sites", 0, "node_groups", 0, "gpu_model"), None, "gpus_per_node without gpu_model"),
        (("regions", 1, "sites", 0, "name"), "s1", None),  # s1-... ids stay unique (different groups)
        (("regions", 0, "sites", 0, "node_groups", 1, "name"), "h", "node ids repeat"),
        (("network", "region_pairs", 0, "regions"), ["r1", "r1"], "two different region names"),
    ],
)
def test_bad_fleets_name_the_offending_entry(path: tuple[Any, ...], value: Any, message: str | None) -> None:
    doc = copy.deepcopy(DOC)
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    if message is None:
        parse_fleet(doc, default_catalogue())
        return
    with pytest.raises(FleetError, match=re.escape(message)):
        parse_fleet(doc, default_catalogue())


@pytest.mark.parametrize(("name", "nodes"), [("small.yaml", 20), ("demo-3regions.yaml", 100)])
def test_shipped_fleets_load(name: str, nodes: int) -> None:
    fleet = load_fleet(FLEETS / name)
    assert len(fleet.nodes) == nodes and len(fleet.regions) == 3
    models = {n.gpu_model for n in fleet.nodes if n.gpu_model}
    assert len(models) >= 4 and all(default_catalogue().lookup(m).known for m in models)


def test_a_missing_fleet_file_is_a_fleet_error(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match=r"nope\.yaml"):
        load_fleet(tmp_path / "nope.yaml")


def test_simulated_load_follows_the_tasks_and_is_deterministic() -> None:
    fleet = parse_fleet(DOC, default_catalogue())
    node = fleet.nodes[0]

    def run(seed: int) -> list[Any]:
        table = TaskTable(device_indices=frozenset(range(8)))
        collector = SimulatedCollector(
            SimulatedNodeModel(node, default_catalogue(), SeededRandom(seed)), table
        )
        idle = collector.collect()
        table.admit(
            Placement(
                "t1",
                "j",
                node.identity.node_id,
                1,
                (DeviceShare(0), DeviceShare(1, 500)),
                cpu_milli=16_000,
                memory_mib=65536,
            )
        )
        return [idle, collector.collect()]

    idle, busy = run(seed=5)
    assert all(d.utilisation_pct == 0 and d.memory_used_mib == 0 for d in idle.devices)
    assert len(busy.devices) == 8 and busy.devices[0].model == "H200"
    assert 50 <= busy.devices[0].utilisation_pct <= 100
    assert 0 < busy.devices[1].utilisation_pct < busy.devices[0].utilisation_pct
    assert busy.devices[1].memory_used_mib == node.gpu_memory_mib // 2
    assert busy.devices[2].utilisation_pct == 0
    assert busy.devices[0].power_w > idle.devices[0].power_w
    assert busy.host.memory_used_mib > idle.host.memory_used_mib
    assert busy.host.cpu_utilisation_pct > idle.host.cpu_utilisation_pct
    assert run(seed=5) == [idle, busy]
    assert run(seed=6)[1] != busy


def test_link_model_is_seeded_and_scoped() -> None:
    a, b, c = SiteRef("r1", "s1"), SiteRef("r1", "s2"), SiteRef("r2", "s3")
    model = LinkModel(region_pairs={frozenset({"r1", "r2"}): LinkProfile(30.0, 2.0, 0.0, 1000.0)})
    rng = SeededRandom(1)
    far = model.sample(a, c, round_no=1, rng=rng)
    assert far == model.sample(a, c, round_no=1, rng=rng) != model.sample(a, c, round_no=2, rng=rng)
    assert far != model.sample(a, c, round_no=1, rng=SeededRandom(2))
    assert 25 < far.rtt_ms < 35 and far.samples == 10 and far.loss_ratio == 0
    assert model.sample(a, b, 1, rng).rtt_ms < 5  # same region
    assert far.link_id == "s1->s3"
    assert len(model.sample_all([a, b, c], 1, rng)) == 6


def test_summarise_counts_lost_probes_and_jitter() -> None:
    s = summarise(SiteRef("r", "a"), SiteRef("r", "b"), [10.0, None, 14.0, 12.0])
    assert s.rtt_ms == pytest.approx(12.0) and s.jitter_ms == pytest.approx(3.0)
    assert s.loss_ratio == 0.25 and s.samples == 4
    lost = summarise(SiteRef("r", "a"), SiteRef("r", "b"), [None, None])
    assert lost.loss_ratio == 1.0 and lost.rtt_ms == 0.0


def test_seeded_randomness_is_the_same_on_every_machine() -> None:
    """Fleet noise and device ids are fixed by the fleet's seed and the key alone (string seeds and UUIDv5
    are defined independently of the platform), so a replay anywhere reports the same values."""
    rng = SeededRandom(7)
    assert device_uuid(rng, "bj1-h100-001", 3) == "GPU-1af422c5-833f-5f0b-aaa7-205b1350a78b"
    assert device_uuid(SeededRandom(8), "bj1-h100-001", 3) == device_uuid(rng, "bj1-h100-001", 3)
    assert busy_factor(rng, "t1") == pytest.approx(0.6084331021160557, abs=1e-15)
    assert busy_factor(SeededRandom(8), "t1") != busy_factor(rng, "t1")
    assert rng.draws("a|b|1").gauss(40.0, 3.0) == rng.draws("a|b|1").gauss(40.0, 3.0)
