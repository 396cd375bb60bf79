"""The `suanli simulate` contract, run through typer's CliRunner on a tiny synthetic trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from suanli.cli.simulate import app, parse_seeds

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"node-{i},32000,131072,{g},{m}\n" for i, (g, m) in enumerate([(4, "A"), (4, "A"), (2, "B"), (1, "B")])
)
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
SHAPES = [
    (2000, 1, 500, ""),
    (4000, 1, 1000, ""),
    (1000, 1, 250, "B"),
    (8000, 2, 1000, "A"),
    (3000, 0, 0, ""),
]


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES)
    pods = tmp_path / "openb_pod_list_tiny.csv"
    rows = []
    for i in range(24):
        cpu, n, milli, spec = SHAPES[i % len(SHAPES)]
        rows.append(f"p{i},{cpu},1024,{n},{milli},{spec},LS,Running,{i * 10},{i * 10 + 35},{i * 10}\n")
    pods.write_text(POD_HEADER + "".join(rows))
    return nodes, pods


def test_json_contract(trace: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = trace
    out_json = tmp_path / "out.json"
    args = [
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--policy",
        "fgd,bestfit,fgdx",
        "--seeds",
        "42-43",
        "--tune",
        "1.3",
        "--json",
        str(out_json),
        "--workers",
        "1",
        "--out",
        str(tmp_path / "runs"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert data["workload"] == "tiny"
    assert set(data["results"]) == {"fgd", "bestfit", "fgdx"}
    for policy in data["results"].values():
        u = policy["unallocated_pct_at_100"]
        assert set(u) == {"mean", "sd", "per_seed"} and len(u["per_seed"]) == 2
        assert all(isinstance(v, float) for v in u["per_seed"]) and 0 <= u["mean"] <= 100
        assert set(policy["allocation_pct_at_130"]) == {"mean", "sd"}
        curve = policy["curve"]
        assert len(curve["arrived_pct"]) == len(curve["unallocated_pct_median"]) > 50
        assert all(isinstance(x, int) for x in curve["arrived_pct"])
    assert (tmp_path / "runs" / "tiny_fgd_seed42.csv").is_file()
    assert (tmp_path / "runs" / "tiny_curves.png").stat().st_size > 1000


def test_timeline_mode_reports_allocation_and_delay(trace: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = trace
    out_json = tmp_path / "t.json"
    args = [
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--policy",
        "bestfit",
        "--seeds",
        "1",
        "--mode",
        "timeline",
        "--json",
        str(out_json),
        "--workers",
        "1",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())["results"]["bestfit"]
    assert 0 < data["mean_allocation_pct"]["mean"] <= 100
    assert data["queue_delay_s"]["p95"] >= data["queue_delay_s"]["p50"] >= 0
    assert data["never_placed"] == [0]  # every pod leaves eventually, so every queued pod gets placed


def test_list_policies_and_bad_input(trace: tuple[Path, Path]) -> None:
    nodes, pods = trace
    listing = CliRunner().invoke(app, ["--list-policies"])
    assert listing.exit_code == 0 and "fgdx" in listing.output and "bestfit" in listing.output
    bad = CliRunner().invoke(app, ["--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd,nope"])
    assert bad.exit_code != 0 and "nope" in bad.output


@pytest.mark.parametrize(
    ("text", "seeds"), [("42-51", list(range(42, 52))), ("42,43", [42, 43]), ("1,5-7,5", [1, 5, 6, 7])]
)
def test_seed_parsing(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "x", "9-3"])
def test_bad_seeds(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_seeds(text)
