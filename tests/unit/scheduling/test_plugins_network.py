"""Network-aware placement: the network snapshot, the network filter and score, region choice for a whole
gang (one region, one zone, or spread over regions linked by enough bandwidth), what placements record,
and the pending reasons NETWORK_CONSTRAINT and NO_REGION_FITS."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import GpuDevice, Job, Locality, Node, Task, TaskRequest
from suanli.scheduling.domain.network import (
    EMPTY_NETWORK,
    LinkStatus,
    NetworkSnapshot,
    RegionLink,
    allowed_regions,
    region_exclusions,
)
from suanli.scheduling.domain.plugins.network import NetworkFilter, NetworkScore
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.pricing import PriceTable, Rate
from suanli.scheduling.domain.queueing import (
    ClusterState,
    GangPlacement,
    NetworkConstraint,
    NodeAvailability,
    NoFit,
    NoRegionFits,
    QuotaExceeded,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import pending, queue, running
from suanli.scheduling.domain.snapshot import ClusterSnapshot


def link(
    src: str, dst: str, rtt: float, status: LinkStatus = LinkStatus.OK, mbps: float | None = None
) -> RegionLink:
    return RegionLink(src, dst, rtt, 0.0, mbps, status, last_probe_ms=1_000)


# Three regions as far apart as the IBM Cloud tables have them (rounded): tokyo-osaka is near, dallas far.
NETWORK = NetworkSnapshot(
    [
        link("osaka", "tokyo", 8.0, mbps=10_000),
        link("dallas", "tokyo", 140.0, mbps=2_000),
        link("tokyo", "dallas", 141.0, mbps=2_000),
        link("dallas", "osaka", 150.0, mbps=500),
    ]
)


def gpu_node(name: str, region: str, zone: str = "z1", gpus: int = 4, model: str = "A100") -> Node:
    devices = tuple(GpuDevice(i, model) for i in range(gpus))
    return Node(name, 64_000, 256_000, devices, region=region, zone=zone)


def cluster(*nodes: Node) -> ClusterSnapshot:
    return ClusterSnapshot.from_nodes(list(nodes))


SNAP = cluster(
    gpu_node("tk-1", "tokyo"),
    gpu_node("os-1", "osaka"),
    gpu_node("os-2", "osaka"),
    gpu_node("da-1", "dallas"),
)
WHOLE = TaskRequest(cpu_milli=4000, memory_mib=8192, gpu_count=1, gpu_milli=1000)


def near(request: TaskRequest, data_region: str = "tokyo", max_rtt: float | None = None) -> TaskRequest:
    return replace(request, data_region=data_region, max_rtt_ms=max_rtt)


def scheduler(network: NetworkSnapshot = NETWORK, prices: PriceTable | None = None) -> Scheduler:
    ctx = PluginContext(DEFAULT_TYPICAL, network=network, prices=prices or PriceTable())
    return Scheduler(policy_profile("fgdb"), np.random.default_rng(0), ctx)


def regions_of(snapshot: ClusterSnapshot, assignments: tuple) -> set[str]:  # type: ignore[type-arg]
    return {snapshot.regions[int(snapshot.region_code[a.node])] for a in assignments}


# -- the snapshot ------------------------------------------------------------------------------------


def test_paths_read_the_reverse_direction_when_one_is_missing_and_a_region_is_near_itself() -> None:
    paths = NETWORK.paths_to("tokyo", ("osaka", "dallas", "tokyo", "sydney"))
    assert paths.rtt_ms[:3].tolist() == [8.0, 140.0, 0.0]
    assert np.isnan(paths.rtt_ms[3])  # nothing measured: unknown, never 0
    assert NETWORK.path("tokyo", "osaka") == (8.0, 10_000.0, LinkStatus.OK)  # only osaka->tokyo was probed
    assert NETWORK.known and not EMPTY_NETWORK.known and NETWORK.last_probe_ms == 1_000


def test_a_path_takes_the_worse_status_of_its_two_directions() -> None:
    net = NetworkSnapshot([link("a", "b", 5.0), link("b", "a", 5.0, LinkStatus.DOWN)])
    assert net.path("a", "b")[2] is LinkStatus.DOWN


@pytest.mark.parametrize(
    "bad", [{"rtt_ms": -1.0}, {"rtt_ms": float("nan")}, {"loss_ratio": 1.5}, {"src": ""}]
)
def test_a_link_refuses_impossible_figures(bad: dict[str, object]) -> None:
    fields = {"src": "a", "dst": "b", "rtt_ms": 1.0, "loss_ratio": 0.0} | bad
    with pytest.raises(ValueError):
        RegionLink(**fields)  # type: ignore[arg-type]


# -- the filter and the score --------------------------------------------------------------------------


def test_filter_rejects_regions_beyond_the_rtt_bound_and_passes_jobs_without_a_data_region() -> None:
    plugin = NetworkFilter(PluginContext(network=NETWORK))
    assert plugin.filter(SNAP, near(WHOLE, max_rtt=20)).tolist() == [True, True, True, False]
    assert plugin.filter(SNAP, near(WHOLE)).tolist() == [True] * 4  # no bound: nothing too far
    # Without a data region the filter has nothing to say: None, which the framework skips (no mask).
    assert plugin.filter(SNAP, WHOLE) is None


@pytest.mark.parametrize(
    "request_",
    [near(WHOLE), near(WHOLE, max_rtt=20), near(WHOLE, max_rtt=200), near(WHOLE, "sydney", 50), WHOLE],
    ids=["no-bound", "near", "far", "unmeasured", "no-data-region"],
)
@pytest.mark.parametrize(
    "network", [NETWORK, EMPTY_NETWORK, NetworkSnapshot([link("osaka", "tokyo", 8.0, LinkStatus.DOWN)])]
)
def test_the_mask_and_the_reasons_agree(request_: TaskRequest, network: NetworkSnapshot) -> None:
    regions = ("tokyo", "osaka", "dallas", "sydney")
    reasons = region_exclusions(network, request_, regions)
    assert allowed_regions(network, request_, regions).tolist() == [r is None for r in reasons]


def test_filter_rejects_a_region_whose_link_is_down_even_without_an_rtt_bound() -> None:
    down = NetworkSnapshot([link("osaka", "tokyo", 8.0, LinkStatus.DOWN), link("dallas", "tokyo", 140.0)])
    plugin = NetworkFilter(PluginContext(network=down))
    assert plugin.filter(SNAP, near(WHOLE)).tolist() == [True, False, False, True]


def test_without_a_network_view_an_rtt_bound_cannot_be_proven_anywhere() -> None:
    plugin = NetworkFilter(PluginContext(network=EMPTY_NETWORK))
    assert plugin.filter(SNAP, near(WHOLE, max_rtt=500)).tolist() == [False] * 4
    assert plugin.filter(SNAP, near(WHOLE)).tolist() == [True] * 4


def test_score_prefers_lower_rtt_and_marks_down_degraded_paths() -> None:
    degraded = NetworkSnapshot(
        [link("osaka", "tokyo", 8.0, LinkStatus.DEGRADED), link("dallas", "tokyo", 140.0)]
    )
    plugin = NetworkScore(PluginContext(network=NETWORK), rtt_scale_ms=300.0, degraded_penalty=0.5)
    rows = np.arange(SNAP.size)
    scores = plugin.score(SNAP, near(WHOLE), rows, np.random.default_rng(0))
    assert scores[0] > scores[1] == scores[2] > scores[3] > 0  # tokyo, osaka, osaka, dallas
    assert plugin.score(SNAP, WHOLE, rows, np.random.default_rng(0)) is None  # adds nothing: skipped
    penalised = NetworkScore(PluginContext(network=degraded), rtt_scale_ms=300.0, degraded_penalty=0.5)
    assert penalised.score(SNAP, near(WHOLE), rows, np.random.default_rng(0))[1] == pytest.approx(
        scores[1] / 2
    )


# -- region choice -------------------------------------------------------------------------------------


def test_a_gang_that_fits_in_one_region_stays_there() -> None:
    # Node by node, fgdb would spread 6 GPU tasks over whatever nodes score best, across regions.
    result = scheduler().place_gang(SNAP, [WHOLE] * 6, Locality.REGION)
    assert result.placed and regions_of(result.snapshot, result.assignments) == {"osaka"}
    chosen = [o for o in result.regions if o.verdict == "chosen"]
    assert [o.region for o in chosen] == ["osaka"]


def test_an_rtt_bound_keeps_a_job_in_the_near_regions() -> None:
    sched = scheduler()
    result = sched.place_gang(SNAP, [near(WHOLE, max_rtt=20)], Locality.ANY)
    assert result.placed and regions_of(result.snapshot, result.assignments) <= {"tokyo", "osaka"}
    verdicts = dict((o.region, o.verdict) for o in result.regions)
    assert verdicts["dallas"] == "RTT 140.0 ms to tokyo > max_rtt_ms 20"


def test_the_nearest_region_wins_when_capacity_and_price_are_equal() -> None:
    snap = cluster(gpu_node("tk-1", "tokyo"), gpu_node("os-1", "osaka"), gpu_node("da-1", "dallas"))
    result = scheduler().place_gang(snap, [near(WHOLE)] * 2, Locality.REGION)
    assert regions_of(result.snapshot, result.assignments) == {"tokyo"}


def test_a_cheaper_region_wins_when_capacity_and_network_are_equal() -> None:
    snap = cluster(gpu_node("a-1", "east"), gpu_node("w-1", "west"))
    prices = PriceTable([Rate("*", "*", 0.02), Rate("*", "west", 0.01)])
    result = scheduler(EMPTY_NETWORK, prices).place_gang(snap, [WHOLE] * 2, Locality.REGION)
    assert regions_of(result.snapshot, result.assignments) == {"west"}


def test_a_region_behind_a_down_link_is_not_chosen() -> None:
    down = NetworkSnapshot([link("osaka", "tokyo", 8.0, LinkStatus.DOWN), link("dallas", "tokyo", 140.0)])
    result = scheduler(down).place_gang(SNAP, [near(WHOLE)] * 6, Locality.REGION)
    # osaka has the room (8 GPUs) but is cut off; no other single region holds 6 GPUs.
    assert not result.placed and not result.network_excluded
    verdicts = dict((o.region, o.verdict) for o in result.regions)
    assert verdicts["osaka"] == "link to tokyo is DOWN"
    assert verdicts["tokyo"].startswith("free room short")


def test_every_region_ruled_out_by_the_network_is_said_so() -> None:
    result = scheduler().place_gang(SNAP, [near(WHOLE, "sydney", max_rtt=50)], Locality.ANY)
    assert not result.placed and result.network_excluded
    assert {o.verdict for o in result.regions} == {"no RTT measured to sydney"}


def test_zone_locality_keeps_a_gang_in_one_zone() -> None:
    snap = cluster(gpu_node("a", "tokyo", "z1"), gpu_node("b", "tokyo", "z2"), gpu_node("c", "tokyo", "z2"))
    result = scheduler().place_gang(snap, [WHOLE] * 6, Locality.ZONE)
    zones = {snap.zones[int(snap.zone_code[a.node])] for a in result.assignments}
    assert result.placed and zones == {"tokyo/z2"}
    too_big = scheduler().place_gang(snap, [WHOLE] * 9, Locality.ZONE)
    assert not too_big.placed
    assert dict((o.region, o.verdict) for o in too_big.regions)["tokyo"].startswith(
        "only 8 of 9 tasks fit in any one zone"
    )


def test_locality_any_spreads_only_over_regions_linked_by_enough_bandwidth() -> None:
    # 13 GPU tasks need tokyo + osaka + dallas (4 + 8 + 4 GPUs); osaka-dallas has 0.5 Gbit/s.
    loose = scheduler().place_gang(SNAP, [WHOLE] * 13, Locality.ANY, min_bandwidth_gbps=0.4)
    assert loose.placed and regions_of(loose.snapshot, loose.assignments) == {"tokyo", "osaka", "dallas"}
    tight = scheduler().place_gang(SNAP, [WHOLE] * 13, Locality.ANY, min_bandwidth_gbps=1.0)
    assert not tight.placed
    # 12 fit in tokyo + osaka, the only pair with 10 Gbit/s between them.
    fits = scheduler().place_gang(SNAP, [WHOLE] * 12, Locality.ANY, min_bandwidth_gbps=5.0)
    assert fits.placed and regions_of(fits.snapshot, fits.assignments) == {"tokyo", "osaka"}


def test_one_region_and_no_network_fields_place_exactly_as_before() -> None:
    snap = cluster(gpu_node("a", "r"), gpu_node("b", "r"))
    new = scheduler(EMPTY_NETWORK).place_gang(snap, [WHOLE] * 3, Locality.REGION)
    old = scheduler(EMPTY_NETWORK).place_gang(snap, [WHOLE] * 3)
    assert new.assignments == old.assignments and new.regions == ()


# -- through the placer and the queueing core -------------------------------------------------------------


def free(n: Node) -> NodeAvailability:
    return NodeAvailability(n, n.cpu_milli, n.memory_mib, tuple(1000 for _ in n.gpus))


NODES = (
    gpu_node("tk-1", "tokyo", model="NVIDIA H200"),
    gpu_node("os-1", "osaka", model="NVIDIA H200"),
    gpu_node("da-1", "dallas", model="NVIDIA H200"),
)


def gang(job_id: str, tasks: int, request: TaskRequest = WHOLE, **fields: object) -> Job:
    return Job(job_id, "q", tuple(Task(f"{job_id}-{i}", request) for i in range(tasks)), **fields)  # type: ignore[arg-type]


def test_a_placement_records_its_region_rtt_and_expected_price() -> None:
    prices = PriceTable([Rate("cpu", "*", 0.05), Rate("h200", "*", 0.012), Rate("h200", "osaka", 0.01)])
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK, prices=prices)
    outcome = placer.place_gang(tuple(free(n) for n in NODES), gang("j", 1, near(WHOLE, max_rtt=20)))
    assert isinstance(outcome, GangPlacement)
    (p,) = outcome.placements
    assert p.region in {"tokyo", "osaka"}
    assert p.rtt_ms == (0.0 if p.region == "tokyo" else 8.0)
    rate = 0.012 if p.region == "tokyo" else 0.01
    from suanli.resources import cpu_cu, cu_of

    assert p.price_per_hour == pytest.approx(
        cpu_cu(4000) * 0.05 + cu_of("NVIDIA H200", 1000) * rate, abs=1e-6
    )


def test_a_placer_reports_the_regions_of_a_gang_that_fits_nowhere() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    outcome = placer.place_gang(tuple(free(n) for n in NODES), gang("j", 6))
    assert isinstance(outcome, NoFit) and not outcome.network_excluded
    assert {r for r, _ in outcome.regions} == {"tokyo", "osaka", "dallas"}


def _state(*pending_: object, network: NetworkSnapshot = NETWORK, **kw: object) -> ClusterState:
    return ClusterState(
        NODES, (queue("q", cpu=10**9, memory=10**9),), pending=pending_, network=network, **kw
    )  # type: ignore[arg-type]


def test_a_cycle_places_an_rtt_bound_job_in_a_near_region() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    result = schedule_cycle(_state(pending(gang("j", 2, near(WHOLE, max_rtt=20)), 1)), placer)
    (admission,) = result.admissions
    assert {p.region for p in admission.placements} <= {"tokyo", "osaka"}
    assert len({p.region for p in admission.placements}) == 1


def test_network_constraint_comes_before_quota() -> None:
    far = gang("j", 1, near(WHOLE, "sydney", max_rtt=30))
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    starved = ClusterState(NODES, (queue("q", cpu=0, memory=0),), pending=(pending(far, 1),), network=NETWORK)
    reason = schedule_cycle(starved, placer).reason("j")
    assert isinstance(reason, NetworkConstraint)
    assert dict(reason.regions) == {r: "no RTT measured to sydney" for r in ("dallas", "osaka", "tokyo")}
    assert "data region sydney, max RTT 30 ms" in reason.message
    plain = schedule_cycle(
        ClusterState(NODES, (queue("q", cpu=0, memory=0),), pending=(pending(gang("k", 1), 1),)), placer
    ).reason("k")
    assert isinstance(plain, QuotaExceeded)  # without network fields, as before


def test_without_a_network_view_a_bound_job_waits_and_others_place() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL)
    state = _state(
        pending(gang("bound", 1, near(WHOLE, max_rtt=500)), 1),
        pending(gang("free", 1), 2),
        network=EMPTY_NETWORK,
    )
    result = schedule_cycle(state, placer)
    assert result.admitted == ("free",)
    reason = result.reason("bound")
    assert isinstance(reason, NetworkConstraint) and {v for _, v in reason.regions} == {"no network view yet"}


def test_a_gang_bigger_than_any_region_is_no_region_fits_before_quota() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    state = ClusterState(NODES, (queue("q", cpu=0, memory=0),), pending=(pending(gang("big", 6), 1),))
    reason = schedule_cycle(state, placer).reason("big")
    assert isinstance(reason, NoRegionFits) and reason.gang == 6 and reason.locality == "region"
    assert dict(reason.regions)["tokyo"] == "the gang needs GPU milli 6000 > 4000 in total"
    assert reason.as_dict()["regions"][0] == {
        "region": "dallas",
        "verdict": "the gang needs GPU milli 6000 > 4000 in total",
    }


def test_a_gang_that_fits_no_region_now_is_no_region_fits_with_each_region() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    busy = running(
        gang("r", 3, replace(WHOLE, gpu_count=2)), 1, ("tk-1", (0, 1)), ("os-1", (0, 1)), ("da-1", (0, 1))
    )
    state = _state(pending(gang("g", 3), 2), running=(busy,))
    reason = schedule_cycle(state, placer).reason("g")
    assert isinstance(reason, NoRegionFits)
    assert dict(reason.regions)["dallas"].startswith("only 2 of 3 tasks fit in the region") or dict(
        reason.regions
    )["dallas"].startswith("free room short")


def test_running_tasks_are_not_stopped_when_their_region_is_cut_off() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    job = gang("r", 1, near(WHOLE, max_rtt=20))
    cut = NetworkSnapshot([link("osaka", "tokyo", 8.0, LinkStatus.DOWN)])
    state = _state(network=cut, running=(running(job, 1, ("os-1", (0,))),))
    result = schedule_cycle(state, placer)
    assert result.preemptions == () and result.admissions == () and result.pending == ()


def test_a_single_task_no_region_can_take_is_explained_by_the_filters() -> None:
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, network=NETWORK)
    request = replace(near(WHOLE), regions=("sydney",))
    outcome = placer.place_gang(tuple(free(n) for n in NODES), gang("j", 1, request))
    assert isinstance(outcome, NoFit) and outcome.rejections == (("region", 3),)
    assert {v for _, v in outcome.regions} == {"not in the job's regions allow-list"}


def test_an_inert_network_plugin_rejects_and_scores_nothing_in_the_framework() -> None:
    # The framework skips a filter or score that answers None; the diagnosis still lists the filter.
    context = PluginContext(network=NETWORK, typical_tasks=DEFAULT_TYPICAL)
    scheduler = Scheduler(policy_profile("fgdb"), np.random.default_rng(0), context)
    rows, diagnosis = scheduler.feasible(SNAP, WHOLE)
    assert rows.tolist() == list(range(SNAP.size))
    assert ("network", 0) in diagnosis.rejected_by
