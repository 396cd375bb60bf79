"""Scripted network faults: validated with one-line errors, applied from at_s until until_s, read from the
fleet file and from a faults file that the simulated prober reads again every round."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from suanli.cli.main import app as root_app
from suanli.resources import default_catalogue
from suanli.resources.network import measured_network
from suanli.sensing.adapters.faults_file import FaultsFile, load_faults
from suanli.sensing.adapters.randomness import SeededRandom
from suanli.sensing.adapters.simulated import SimulatedLinkProber
from suanli.sensing.domain.faults import (
    FaultError,
    FaultWindow,
    LinkDegraded,
    LinkEnds,
    LinkLossy,
    RegionPartitioned,
    parse_faults,
)
from suanli.sensing.domain.fleet import FleetError, FleetSpec, parse_fleet
from suanli.sensing.domain.links import LinkSample

FLEET: dict[str, Any] = {
    "name": "faulty",
    "seed": 3,
    "regions": [
        {
            "name": region,
            "sites": [
                {"name": f"{code}1", "zone": f"{region}-1", "node_groups": [{"name": "c", "count": 1}]},
                {"name": f"{code}2", "zone": f"{region}-2", "node_groups": [{"name": "c", "count": 1}]},
            ],
        }
        for region, code in (("washington-dc", "wdc"), ("frankfurt", "fra"), ("tokyo", "tok"))
    ],
}
REGIONS = ("washington-dc", "frankfurt", "tokyo")
SITES = ("wdc1", "wdc2", "fra1", "fra2", "tok1", "tok2")


def fleet(faults: list[dict[str, Any]] | None = None) -> FleetSpec:
    doc = copy.deepcopy(FLEET)
    if faults is not None:
        doc["faults"] = faults
    return parse_fleet(doc, default_catalogue(), measured_network())


def test_valid_faults_parse_into_their_kinds() -> None:
    faults = parse_faults(
        [
            {
                "kind": "degrade",
                "link": ["washington-dc", "frankfurt"],
                "rtt_ms": 400,
                "at_s": 10,
                "until_s": 20,
            },
            {"kind": "loss", "link": ["fra1", "tok1"], "loss_pct": 30},
            {"kind": "partition", "region": "tokyo", "at_s": 5.5},
        ],
        regions=REGIONS,
        sites=SITES,
    )
    assert faults == (
        LinkDegraded(LinkEnds("washington-dc", "frankfurt"), 400.0, FaultWindow(10.0, 20.0)),
        LinkLossy(LinkEnds("fra1", "tok1"), 0.3, FaultWindow(0.0)),
        RegionPartitioned("tokyo", FaultWindow(5.5)),
    )
    assert parse_faults(None, regions=REGIONS, sites=SITES) == ()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "partition", "region": "mars"}, "faults[0].region: 'mars' is not a region of this fleet"),
        (
            {"kind": "partition", "region": "tokyo", "at_s": -5},
            "faults[0].at_s: must not be negative, got -5",
        ),
        (
            {"kind": "partition", "region": "tokyo", "at_s": 60, "until_s": 30},
            "faults[0].until_s: 30 is not after",
        ),
        ({"kind": "loss", "link": ["fra1", "tok1"], "loss_pct": 150}, "faults[0].loss_pct: expected 0..100"),
        ({"kind": "loss", "link": ["fra1", "tok1"]}, "faults[0].loss_pct: expected a number, got None"),
        ({"kind": "degrade", "link": ["fra1"], "rtt_ms": 9}, "faults[0].link: expected two ends"),
        ({"kind": "degrade", "link": ["fra1", "moon"], "rtt_ms": 9}, "faults[0].link[1]: 'moon' is neither"),
        ({"kind": "degrade", "link": ["fra1", "fra1"], "rtt_ms": 9}, "faults[0].link: both ends are 'fra1'"),
        (
            {"kind": "degrade", "link": ["fra1", "tok1"], "rtt_ms": "slow"},
            "faults[0].rtt_ms: expected a number",
        ),
        ({"kind": "cut", "region": "tokyo"}, "faults[0].kind: expected one of degrade, loss, partition"),
        ({"kind": "partition", "region": "tokyo", "util_s": 9}, "faults[0]: unknown field 'util_s'"),
        ("tokyo", "faults[0]: expected a mapping, got str"),
    ],
)
def test_bad_faults_are_one_line_errors_naming_the_entry(entry: Any, message: str) -> None:
    with pytest.raises(FaultError, match=re.escape(message)) as caught:
        parse_faults([entry], regions=REGIONS, sites=SITES)
    assert "\n" not in str(caught.value)


def test_a_bad_fault_in_a_fleet_file_is_a_fleet_error() -> None:
    with pytest.raises(FleetError, match=re.escape("faults[0].region: 'mars'")):
        fleet([{"kind": "partition", "region": "mars"}])


def _by_pair(samples: list[LinkSample]) -> dict[tuple[str, str], LinkSample]:
    return {(s.src_site, s.dst_site): s for s in samples}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_fleet_faults_apply_from_at_s_until_until_s() -> None:
    spec = fleet(
        [
            {
                "kind": "degrade",
                "link": ["washington-dc", "frankfurt"],
                "rtt_ms": 400,
                "at_s": 10,
                "until_s": 20,
            },
            {"kind": "loss", "link": ["fra1", "tok1"], "loss_pct": 100, "at_s": 10},
            {"kind": "partition", "region": "tokyo", "at_s": 30, "until_s": 40},
        ]
    )
    clock = Clock()
    prober = SimulatedLinkProber(spec, SeededRandom(spec.seed), monotonic=clock)

    before = _by_pair(await prober.probe_round(1))
    assert len(before) == 30
    assert before[("wdc1", "fra1")].rtt_ms < 150 and before[("fra1", "tok1")].loss_ratio == 0

    clock.now += 10  # the degradation and the loss begin
    during = _by_pair(await prober.probe_round(2))
    for pair in (("wdc1", "fra1"), ("fra2", "wdc2"), ("wdc2", "fra1")):  # every site pair, both directions
        assert 380 < during[pair].rtt_ms < 420
        assert (during[pair].bandwidth_mbps or 0) < (before[pair].bandwidth_mbps or 0) / 3
    assert during[("fra1", "tok1")].loss_ratio == 1.0 and during[("tok1", "fra1")].loss_ratio == 1.0
    assert during[("fra2", "tok1")].loss_ratio == 0  # another site pair of the same regions
    untouched = during[("wdc1", "tok1")]  # a link no fault names
    assert untouched.rtt_ms < 200 and untouched.loss_ratio < 1

    clock.now += 20  # 30 s: the degradation is over, tokyo is cut off
    cut = _by_pair(await prober.probe_round(3))
    assert cut[("wdc1", "fra1")].rtt_ms < 150
    touching = [s for pair, s in cut.items() if "tok1" in pair or "tok2" in pair]
    assert len(touching) == 18 and all(s.loss_ratio == 1.0 and s.bandwidth_mbps == 0.0 for s in touching)
    assert all(s.rtt_ms == 0.0 for s in touching)
    assert cut[("tok1", "tok2")].loss_ratio == 1.0  # inside the region too: every link of it

    clock.now += 10  # 40 s: healed
    healed = _by_pair(await prober.probe_round(4))
    assert healed[("wdc1", "tok1")].loss_ratio < 1.0 and healed[("wdc1", "tok1")].rtt_ms > 100


async def test_the_faults_file_is_read_again_every_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = fleet()
    path = tmp_path / "faults.yaml"
    clock = Clock()
    prober = SimulatedLinkProber(
        spec, SeededRandom(spec.seed), monotonic=clock, runtime_faults=FaultsFile(path, spec).current
    )
    assert all(s.loss_ratio < 1 for s in await prober.probe_round(1))  # no file yet: no faults

    path.write_text("faults:\n  - {kind: partition, region: frankfurt}\n")
    cut = await prober.probe_round(2)
    assert {s.loss_ratio for s in cut if "frankfurt" in (s.src_region, s.dst_region)} == {1.0}
    assert all(s.loss_ratio < 1 for s in cut if "frankfurt" not in (s.src_region, s.dst_region))

    path.write_text("faults:\n  - {kind: partition, region: atlantis}\n")  # a typo mid-run
    kept = await prober.probe_round(3)
    assert {s.loss_ratio for s in kept if "frankfurt" in (s.src_region, s.dst_region)} == {1.0}
    assert "faults[0].region: 'atlantis'" in caplog.text

    path.write_text("- {kind: degrade, link: [wdc1, tok2], rtt_ms: 900}\n")  # a bare list works too
    degraded = _by_pair(await prober.probe_round(4))
    assert degraded[("tok2", "wdc1")].rtt_ms > 800 and degraded[("fra1", "tok1")].loss_ratio < 1

    path.write_text("")
    assert all(s.loss_ratio < 1 and s.rtt_ms < 300 for s in await prober.probe_round(5))


def test_load_faults_names_the_file(tmp_path: Path) -> None:
    spec = fleet()
    assert load_faults(tmp_path / "missing.yaml", spec) == ()
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults: [{kind: loss, link: [fra1, tok1], loss_pct: -1}]\n")
    with pytest.raises(FaultError, match=r"bad\.yaml: faults\[0\]\.loss_pct: must not be negative"):
        load_faults(bad, spec)
    bad.write_text("faults: [unclosed\n")
    with pytest.raises(FaultError, match=r"bad\.yaml: not YAML"):
        load_faults(bad, spec)
    bad.write_text("fault: []\n")
    with pytest.raises(FaultError, match="unknown top-level field 'fault'"):
        load_faults(bad, spec)


def test_the_agent_refuses_a_bad_faults_file_at_start(tmp_path: Path) -> None:
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(
        "name: f\nregions:\n  - name: tokyo\n    sites:\n"
        "      - name: tok1\n        node_groups: [{name: c}]\n"
    )
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults: [{kind: partition, region: osaka}]\n")
    runner = CliRunner()
    result = runner.invoke(
        root_app, ["agent", "--simulate", str(fleet_file), "--faults", str(faults), "--once"]
    )
    assert result.exit_code == 2
    assert "faults[0].region: 'osaka' is not a region of this fleet (tokyo)" in result.output

    alone = runner.invoke(root_app, ["agent", "--faults", str(faults), "--once"])
    assert alone.exit_code == 2 and "needs --simulate" in alone.output

    faults.write_text("faults: [{kind: partition, region: tokyo}]\n")
    ok = runner.invoke(root_app, ["agent", "--simulate", str(fleet_file), "--faults", str(faults), "--once"])
    assert ok.exit_code == 0, ok.output
