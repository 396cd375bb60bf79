"""`suanli simulate --mode multiregion` end to end through the CLI on a small synthetic openb-format trace:
every policy reported with every metric, and no gang split across regions unless the policy ignores
locality."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.cli.simulate import app
from suanli.scheduling.simulator.batch import MULTIREGION_METRICS

POLICIES = ("region-blind", "nearest-first", "network-aware")
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
SINGLES = [(2000, 1, 500), (4000, 1, 1000), (1000, 1, 250), (8000, 2, 1000), (3000, 0, 0)]


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    rows = [f"t4-{i},32000,131072,4,T4\n" for i in range(20)] + [
        f"g2-{i},96000,393216,8,G2\n" for i in range(10)
    ]
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(rows))
    pods = tmp_path / "openb_pod_list_small.csv"
    lines = []
    for i in range(200):
        cpu, n, milli = SINGLES[i % len(SINGLES)]
        lines.append(f"p{i},{cpu},1024,{n},{milli},,LS,Running,{i * 10},{i * 10 + 5},{i * 10}\n")
    for g in range(20):  # gangs of three whole-node T4 pods created in the same second
        lines += [
            f"g{g}-{k},8000,4096,4,1000,T4,LS,Running,{5 + g * 100},{9 + g * 100},0\n" for k in range(3)
        ]
    pods.write_text(POD_HEADER + "".join(lines))
    return nodes, pods


def test_multiregion_json_has_every_policy_and_metric_and_no_split_gang_where_locality_holds(
    trace: tuple[Path, Path], tmp_path: Path
) -> None:
    nodes, pods = trace
    out_json = tmp_path / "mr.json"
    args = ["--mode", "multiregion", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1-2"]
    args += ["--workers", "1", "--json", str(out_json), "--out", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert data["mode"] == "multiregion" and data["workload"] == "small"
    assert len(data["setup"]["regions"]) == 10 and sum(data["setup"]["nodes_per_region"].values()) == 30
    assert set(data["results"]) == set(POLICIES)
    for name, r in data["results"].items():
        for metric in MULTIREGION_METRICS:
            assert set(r[metric]) == {"mean", "sd", "per_seed"} and len(r[metric]["per_seed"]) == 2, (
                name,
                metric,
            )
        assert 0 < r["placed_pct"]["mean"] <= 100 and 0 <= r["unallocated_pct_at_100"]["mean"] <= 100
        assert r["rtt_p99_ms"]["mean"] >= r["rtt_mean_ms"]["mean"] >= 0
        assert r["cost_per_gpu_hour"]["mean"] > 0 and r["currency"] == "CNY"
        assert min(r["gangs"]) > 0
    # Every policy sees the same jobs: the workload and its network fields do not depend on the policy.
    assert len({json.dumps([r["jobs"], r["gangs"]]) for r in data["results"].values()}) == 1
    for name in ("nearest-first", "network-aware"):
        r = data["results"][name]
        assert r["split_gangs"]["per_seed"] == [0.0, 0.0], name
        assert r["rtt_bound_violations"]["per_seed"] == [0.0, 0.0], name
    blind = data["results"]["region-blind"]
    # Region-blind ignores locality and bounds: the counts above would catch a split if one happened.
    assert sum(blind["split_gangs"]["per_seed"]) > 0 and sum(blind["rtt_bound_violations"]["per_seed"]) > 0
    assert blind["rtt_mean_ms"]["mean"] > data["results"]["network-aware"]["rtt_mean_ms"]["mean"]
    with open(tmp_path / "runs" / "small_multiregion.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["policy"], r["seed"]) for r in rows) == sorted(
        (p, s) for p in POLICIES for s in ("1", "2")
    )
    assert (tmp_path / "runs" / "small_multiregion.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "fgd"], "unknown policy"),
        (["--data-weights", "mars=1"], "unknown region"),
        (["--region-weights", "dallas=-2"], ">= 0"),
        (["--bound-share", "2"], "0..1"),
    ],
)
def test_bad_multiregion_flags_are_usage_errors(
    trace: tuple[Path, Path], extra: list[str], message: str
) -> None:
    nodes, pods = trace
    args = ["--mode", "multiregion", "--nodes", str(nodes), "--pods", str(pods), "--workers", "1", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_help_documents_the_multiregion_mode() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    for text in ("multiregion", "--region-weights", "--data-weights", "--bound-share", "--pricebook"):
        assert text in result.output


def test_cost_comes_from_the_price_book_given(trace: tuple[Path, Path], tmp_path: Path) -> None:
    _, pods = trace
    nodes = tmp_path / "t4.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"t4-{i},32000,131072,4,T4\n" for i in range(30))
    )
    book = tmp_path / "book.yaml"
    book.write_text(
        "currency: EUR\nversions:\n  - effective_from: '2025-01-01T00:00:00Z'\n    rates:\n"
        "      - {device_class: '*', cu_hour: '0.01'}\n      - {device_class: cpu, cu_hour: '0'}\n"
    )
    out_json = tmp_path / "mr.json"
    args = ["--mode", "multiregion", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "3"]
    args += ["--workers", "1", "--policy", "network-aware", "--pricebook", str(book), "--json", str(out_json)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    r = json.loads(out_json.read_text())["results"]["network-aware"]
    # A T4 is 65 CU; at 0.01 per CU-hour and free CPU every placed GPU-hour costs 0.65.
    assert r["currency"] == "EUR" and r["cost_per_gpu_hour"]["mean"] == pytest.approx(0.65)
