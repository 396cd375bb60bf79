"""The network model of simulated fleets: the measured tables of traces/network/, the jitter, loss and
bandwidth models on their RTTs, and the shipped fleets in the tables' regions."""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict

import pytest

from suanli.data import data_path
from suanli.resources import default_catalogue
from suanli.resources.network import NetworkDataError, measured_network, parse_measured_network, region_id
from suanli.sensing.adapters.fleet_file import load_fleet
from suanli.sensing.adapters.randomness import SeededRandom
from suanli.sensing.domain.fleet import FleetError, parse_fleet
from suanli.sensing.domain.links import LinkModel, LinkProfile, SiteRef
from suanli.sensing.domain.network import BandwidthModel, JitterModel, LossModel

REGIONS = (
    "dallas",
    "frankfurt",
    "london",
    "madrid",
    "osaka",
    "sao-paulo",
    "sydney",
    "tokyo",
    "toronto",
    "washington-dc",
)


def _published_medians() -> dict[tuple[str, str], float]:
    by_pair: dict[tuple[str, str], list[float]] = defaultdict(list)
    with data_path("traces/network/regions_rtt.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            by_pair[(row["src_region"], row["dst_region"])].append(float(row["rtt_ms_avg"]))
    return {pair: statistics.median(v) for pair, v in by_pair.items()}


def test_the_tables_are_package_data_with_ten_regions_and_their_zones() -> None:
    assert data_path("traces/network/regions_rtt.csv").is_file()
    assert data_path("traces/network/zones_rtt.csv").is_file()
    net = measured_network()
    assert net.regions == REGIONS
    assert net.display_names["washington-dc"] == "Washington DC"
    assert net.display_names["sao-paulo"] == "Sao Paulo"
    assert len(net.region_rtt_ms) == 90 and len(net.zone_rtt_ms) == 60
    assert set(net.zone_regions.values()) == set(REGIONS)


def test_a_region_pair_is_the_median_of_the_five_windows_in_the_published_direction() -> None:
    net = measured_network()
    medians = _published_medians()
    assert len(medians) == 90
    for (src, dst), median in medians.items():
        assert net.region_rtt(region_id(src), region_id(dst)) == median
    assert net.region_rtt("dallas", "sao-paulo") == 144.0
    assert net.region_rtt("sao-paulo", "dallas") == 145.0  # directional as published
    assert net.region_rtt("dallas", "dallas") is None


def test_zone_pairs_come_from_the_zones_table() -> None:
    net = measured_network()
    assert net.zone_rtt("dallas-1", "dallas-2") == 1.91
    assert net.zone_rtt("washington-dc-2", "washington-dc-3") == 0.81
    assert min(net.zone_rtt_ms.values()) == 0.63 and max(net.zone_rtt_ms.values()) == 2.83


def test_ids_are_lower_case_with_hyphens() -> None:
    assert region_id("Washington DC") == "washington-dc"
    assert region_id("Sao  Paulo ") == "sao-paulo"
    assert region_id("Dallas 1") == "dallas-1"


@pytest.mark.parametrize(
    ("regions", "zones", "message"),
    [
        ("a,b\n1,2\n", "region,src_zone,dst_zone,rtt_ms_avg\nR,R 1,R 2,1\n", "lacks columns"),
        (
            "src_region,dst_region,rtt_ms_avg\nA,B,fast\n",
            "region,src_zone,dst_zone,rtt_ms_avg\nR,R 1,R 2,1\n",
            "line 2",
        ),
        (
            "src_region,dst_region,rtt_ms_avg\nA,B,-1\n",
            "region,src_zone,dst_zone,rtt_ms_avg\nR,R 1,R 2,1\n",
            "negative",
        ),
        (
            "src_region,dst_region,rtt_ms_avg\n",
            "region,src_zone,dst_zone,rtt_ms_avg\nR,R 1,R 2,1\n",
            "no rows",
        ),
    ],
)
def test_a_bad_table_names_the_problem(regions: str, zones: str, message: str) -> None:
    with pytest.raises(NetworkDataError, match=message):
        parse_measured_network(regions, zones)


def test_jitter_loss_and_bandwidth_models() -> None:
    jitter, loss, bandwidth = JitterModel(), LossModel(), BandwidthModel()
    assert jitter.jitter_ms(150.0) == pytest.approx(3.0)
    assert jitter.jitter_ms(0.5) == pytest.approx(0.02)  # the floor
    assert loss.loss_ratio(1.0) == pytest.approx(0.00011)
    assert loss.loss_ratio(200.0) == pytest.approx(0.0021)
    assert loss.loss_ratio(10_000.0) == 0.01  # capped
    assert bandwidth.inter_region(20.0) == 10_000.0  # the scope's cap
    assert bandwidth.inter_region(100.0) == pytest.approx(4_000.0)  # 400 Mbit in flight over 100 ms
    for bad in (lambda: JitterModel(ratio=-1), lambda: LossModel(max_ratio=2), lambda: BandwidthModel(0)):
        with pytest.raises(ValueError, match="bad"):
            bad()


def _model() -> LinkModel:
    return LinkModel(measured=measured_network())


def test_profiles_by_scope_on_the_measured_rtts() -> None:
    model = _model()
    dal1 = SiteRef("dallas", "dal1", "dallas-1")
    dal1b = SiteRef("dallas", "dal1b", "dallas-1")
    dal2 = SiteRef("dallas", "dal2", "dallas-2")
    sao = SiteRef("sao-paulo", "sao1", "sao-paulo-1")
    far = model.profile(dal1, sao)
    assert far.rtt_ms == 144.0 and model.profile(sao, dal1).rtt_ms == 145.0
    assert far.jitter_ms == pytest.approx(0.02 * 144) and far.loss_ratio == pytest.approx(0.0001 + 0.00144)
    assert far.bandwidth_mbps == pytest.approx(400_000 / 144)
    zones = model.profile(dal1, dal2)
    assert (zones.rtt_ms, zones.bandwidth_mbps) == (1.91, 25_000.0)
    campus = model.profile(dal1, dal1b)
    assert (campus.rtt_ms, campus.bandwidth_mbps) == (0.5, 100_000.0)
    # Regions and zones the tables do not know keep the fleet file's scope profiles.
    assert model.profile(SiteRef("mars", "m1"), sao) == model.inter_region
    assert model.profile(SiteRef("dallas", "x", "dallas-9"), dal1) == model.intra_region


def test_an_explicit_region_pair_overrides_the_tables() -> None:
    pinned = LinkProfile(28.0, 1.5, 0.0005, 20_000.0)
    model = LinkModel(measured=measured_network(), region_pairs={frozenset({"dallas", "tokyo"}): pinned})
    assert model.profile(SiteRef("tokyo", "t", "tokyo-1"), SiteRef("dallas", "d", "dallas-1")) == pinned


def test_sampled_rounds_follow_the_table_and_are_reproducible() -> None:
    model = _model()
    src, dst = SiteRef("frankfurt", "fra1", "frankfurt-1"), SiteRef("tokyo", "tok1", "tokyo-1")
    rtt = model.profile(src, dst).rtt_ms
    rounds = [model.sample(src, dst, n, SeededRandom(3)) for n in range(1, 41)]
    mean = statistics.fmean(r.rtt_ms for r in rounds)
    assert abs(mean - rtt) < 0.01 * rtt
    assert all(0 < r.jitter_ms < 0.1 * rtt for r in rounds)
    assert all(0.9 * 400_000 / rtt <= (r.bandwidth_mbps or 0) <= 400_000 / rtt for r in rounds)
    assert rounds[0] == model.sample(src, dst, 1, SeededRandom(3))


def test_the_fleet_network_section_sets_the_models_and_names_bad_fields() -> None:
    doc = {
        "name": "n",
        "regions": [
            {"name": "dallas", "sites": [{"name": "d1", "node_groups": [{"name": "c", "count": 1}]}]}
        ],
        "network": {"jitter": {"ratio": 0.05}, "bandwidth": {"window_mbit": 100}, "same_zone_rtt_ms": 0.3},
    }
    links = parse_fleet(doc, default_catalogue(), measured_network()).links
    assert links.jitter == JitterModel(ratio=0.05) and links.bandwidth.window_mbit == 100
    assert links.same_zone_rtt_ms == 0.3 and links.measured is not None
    off = parse_fleet({**doc, "network": {"measured": False}}, default_catalogue(), measured_network())
    assert off.links.measured is None
    with pytest.raises(FleetError, match=r"network\.loss: unknown field 'per_km'"):
        parse_fleet({**doc, "network": {"loss": {"per_km": 1}}}, default_catalogue())
    with pytest.raises(FleetError, match=r"network\.jitter\.ratio: expected a number >= 0"):
        parse_fleet({**doc, "network": {"jitter": {"ratio": -1}}}, default_catalogue())


def test_the_world_fleet_spans_the_ten_regions_of_the_tables() -> None:
    fleet = load_fleet(data_path("deploy/fleets/world-10regions.yaml"))
    assert sorted(fleet.regions) == list(REGIONS)
    per_region = {r: sum(1 for n in fleet.nodes if n.identity.region == r) for r in fleet.regions}
    assert all(10 <= count <= 20 for count in per_region.values()), per_region
    models = {n.gpu_model for n in fleet.nodes if n.gpu_model}
    assert len(models) >= 6 and all(default_catalogue().lookup(m).known for m in models)
    assert len(fleet.sites) == 20
    net = measured_network()
    assert all(s.zone in net.zone_regions for s in fleet.sites)  # every zone is a measured one
    samples = fleet.links.sample_all(fleet.sites, 1, SeededRandom(fleet.seed))
    assert len(samples) == 20 * 19
    inter = [s for s in samples if s.src_region != s.dst_region]
    assert all(
        abs(s.rtt_ms - net.region_rtt_ms[(s.src_region, s.dst_region)]) < 0.1 * s.rtt_ms for s in inter
    )


@pytest.mark.parametrize(
    "name", ["small.yaml", "demo-3regions.yaml", "bench-200.yaml", "world-10regions.yaml"]
)
def test_every_shipped_fleet_uses_region_and_zone_ids_of_the_tables(name: str) -> None:
    fleet = load_fleet(data_path("deploy/fleets") / name)
    net = measured_network()
    assert set(fleet.regions) <= set(net.regions)
    assert all(net.zone_regions.get(s.zone) == s.region for s in fleet.sites)
