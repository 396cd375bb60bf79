"""`suanli network` and `suanli route resolve` in the CLI's one output style, against a fake routing stub
answering real messages: the matrix for people, one row per link or candidate for scripts."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.cli import network, output
from suanli.cli.main import app

runner = CliRunner()
LONG_REASON = "loss above 5% on every probe of the last round, " * 3


def link(src: str, dst: str, rtt: float, status: int = pb.LINK_STATUS_OK, **extra: Any) -> pb.Link:
    sites = (extra.pop("src_site", ""), extra.pop("dst_site", ""))
    scope = "site" if sites[0] else "region"
    ends = [f"{r}-{s}" if s else r for r, s in zip((src, dst), sites, strict=True)]
    return pb.Link(
        link_id="->".join(ends),
        scope=scope,
        src_region=src,
        src_site=sites[0],
        dst_region=dst,
        dst_site=sites[1],
        rtt_ms=rtt,
        status=status,
        **extra,
    )


MATRIX = pb.NetworkMatrix(
    regions=["tokyo", "osaka", "Frankfurt"],
    region_links=[
        link("tokyo", "osaka", 8.25, loss_ratio=0.001, bandwidth_mbps=10_000, jitter_p95_ms=0.5),
        link("tokyo", "Frankfurt", 240.0, pb.LINK_STATUS_DOWN, loss_ratio=1.0, reason=LONG_REASON),
        link("osaka", "tokyo", 8.5, jitter_p95_ms=0.7),
        link("Frankfurt", "tokyo", 120.0, pb.LINK_STATUS_DEGRADED, loss_ratio=0.02),
    ],
    site_links=[link("tokyo", "osaka", 9.0, src_site="t1", dst_site="o1", bandwidth_mbps=2500)],
)


def candidate(region: str, site: str, total: float, rtt: float, price: float) -> pb.Candidate:
    score = pb.Score(total=total, compute=0.5, network=1 / (1 + rtt / 50), price=0.25)
    return pb.Candidate(
        region=region,
        site=site,
        device_class="H100-80G",
        gpu_model="H100",
        score=score,
        free_cu=989,
        total_cu=3956,
        rtt_ms=rtt,
        price_per_hour=price,
        currency="CNY",
        link_status=pb.LINK_STATUS_OK,
    )


RESOLVED = pb.ResolveResponse(
    candidates=[
        candidate("osaka", "o1", 0.812, 8.5, 21.5),
        candidate("tokyo", "t1", 0.75, 0.3, 24.0),
        candidate("seoul", "s1", 0.5, 31.0, 19.25),
    ],
    excluded=[
        pb.Exclusion(
            region="Frankfurt",
            device_class="H100-80G",
            code=pb.EXCLUSION_CODE_LINK_DOWN,
            reason=LONG_REASON,
            count=1,
        ),
        pb.Exclusion(
            region="osaka", site="o2", code=pb.EXCLUSION_CODE_CAPACITY, reason="500 CU free", count=2
        ),
    ],
    excluded_total=7,
)


class FakeRouting:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def GetNetwork(self, request: pb.GetNetworkRequest, timeout: float) -> pb.NetworkMatrix:
        self.requests.append(request)
        answer = pb.NetworkMatrix()
        answer.CopyFrom(MATRIX)
        if not request.sites:
            del answer.site_links[:]
        return answer

    def Resolve(self, request: pb.ResolveRequest, timeout: float) -> pb.ResolveResponse:
        self.requests.append(request)
        return RESOLVED


@pytest.fixture
def routing(monkeypatch: pytest.MonkeyPatch) -> FakeRouting:
    fake = FakeRouting()

    @contextmanager
    def connected(addr: str) -> Iterator[FakeRouting]:
        yield fake

    monkeypatch.setattr(network, "_routing", connected)
    # A pipe of 80 columns, what rich assumes when it cannot ask a terminal.
    monkeypatch.setattr(output, "stdout", output.Console(highlight=False, width=80, force_terminal=False))
    return fake


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_network_shows_the_matrix_and_the_site_paths(routing: FakeRouting) -> None:
    shown = [line.split() for line in run("network", "--sites").splitlines()]
    assert shown[1] == ["FROM", "\\", "TO", "tokyo", "osaka", "Frankfurt"]  # region names as spelt
    assert shown[2] == ["tokyo", "-", "8.2", "ms", "0.1%", "OK", "240.0", "ms", "100.0%", "DOWN"]
    assert shown[4] == ["Frankfurt", "120.0", "ms", "2.0%", "DEGRADED", "-", "-"]
    assert shown[5:7] == [[], ["site", "paths"]]
    assert shown[8][:7] == ["tokyo/t1", "osaka/o1", "OK", "9.0", "0.0", "0.0%", "2.50"]
    assert routing.requests == [pb.GetNetworkRequest(sites=True)]


def test_network_json_and_yaml_are_the_links_as_data(routing: FakeRouting) -> None:
    data = json.loads(run("network", "--sites", "-o", "json"))
    assert data["regions"] == ["tokyo", "osaka", "Frankfurt"]
    assert [x["link_id"] for x in data["links"]] == [
        "tokyo->osaka",
        "tokyo->Frankfurt",
        "osaka->tokyo",
        "Frankfurt->tokyo",
        "tokyo-t1->osaka-o1",
    ]
    first = data["links"][0]
    assert (first["rtt_ms"], first["loss_ratio"], first["bandwidth_mbps"]) == (8.25, 0.001, 10000.0)
    assert (first["status"], first["scope"]) == ("LINK_STATUS_OK", "region")
    assert data["links"][1]["reason"] == LONG_REASON
    assert yaml.safe_load(run("network", "-o", "yaml"))["links"][3]["status"] == "LINK_STATUS_DEGRADED"


def test_network_csv_is_one_row_per_link_and_no_headers_drops_the_header(routing: FakeRouting) -> None:
    parsed = list(csv.reader(io.StringIO(run("network", "-o", "csv"))))
    assert parsed[0] == list(network.LINK_COLUMNS)
    assert parsed[1][:7] == ["tokyo", "osaka", "OK", "8.2", "0.5", "0.1%", "10.00"]
    assert parsed[2][6:8] == ["-", LONG_REASON]
    headless = list(csv.reader(io.StringIO(run("network", "-o", "csv", "--no-headers"))))
    assert headless == parsed[1:]
    table = run("network", "--no-headers").splitlines()
    assert table[0].split()[0] == "tokyo" and "FROM" not in "".join(table) and "network:" not in table[0]


def test_network_sorted_or_wide_lists_the_links_never_cut_when_piped(routing: FakeRouting) -> None:
    ordered = [
        line.split()[:2] for line in run("network", "--sort-by", "-rtt_ms", "--no-headers").splitlines()
    ]
    assert ordered == [["tokyo", "Frankfurt"], ["Frankfurt", "tokyo"], ["osaka", "tokyo"], ["tokyo", "osaka"]]
    wide = run("network", "-o", "wide").splitlines()
    assert wide[0].split()[-6:] == ["SCOPE", "BASELINE", "MS", "ROUNDS", "LAST", "PROBE"]
    assert any(LONG_REASON.strip() in line for line in wide)  # one line, as wide as its content
    assert run("network", "-o", "name").splitlines()[0] == "link/tokyo->osaka"
    assert run("network", "-o", "jsonpath={.links[*].rtt_ms}") == "8.25 240.0 8.5 120.0\n"


def test_network_png_keeps_stdout_the_answer(
    routing: FakeRouting, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[tuple[list[str], Path]] = []
    # The heat map itself is drawn in the integration test: matplotlib takes seconds to import.
    monkeypatch.setattr(network, "heat_map", lambda matrix, path: drawn.append((list(matrix.regions), path)))
    png = tmp_path / "net.png"
    result = runner.invoke(app, ["network", "--png", str(png), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["regions"] == ["tokyo", "osaka", "Frankfurt"]
    assert result.stderr == f"wrote {png}\n"
    assert drawn == [(["tokyo", "osaka", "Frankfurt"], png)]


def test_route_resolve_ranks_candidates_with_scores_and_lists_exclusions(routing: FakeRouting) -> None:
    shown = [line.split() for line in run("route", "resolve", "--from", "tokyo", "--cu", "989").splitlines()]
    assert shown[0] == ["candidates", "from", "tokyo,", "best", "first"]
    assert shown[1][:5] == ["RANK", "REGION", "SITE", "DEVICE", "SCORE"]
    scores = ["0.812", "0.500", "0.855", "0.250"]  # total, compute, network, price
    assert shown[2] == ["1", "osaka", "o1", "H100-80G", *scores, "989", "8.5", "21.5000", "CNY"]
    assert shown[6] == ["excluded:", "7", "pool(s),", "2", "listed"]
    assert shown[8][:5] == ["Frankfurt", "(all)", "H100-80G", "LINK_DOWN", "1"]
    assert shown[9] == ["osaka", "o2", "CAPACITY", "2", "500", "CU", "free"]
    assert routing.requests[0].cu == 989 and routing.requests[0].from_region == "tokyo"


def test_route_resolve_for_scripts(routing: FakeRouting) -> None:
    data = json.loads(run("route", "resolve", "--from", "tokyo", "-o", "json"))
    best = data["candidates"][0]
    assert (best["region"], best["score"]["total"], best["price_per_hour"]) == ("osaka", 0.812, 21.5)
    assert [e["code"] for e in data["excluded"]] == ["EXCLUSION_CODE_LINK_DOWN", "EXCLUSION_CODE_CAPACITY"]
    assert data["excluded_total"] == 7
    cheapest = json.loads(run("route", "resolve", "--from", "tokyo", "-o", "json", "--sort-by", "per_hour"))
    assert [c["region"] for c in cheapest["candidates"]] == ["seoul", "osaka", "tokyo"]
    rows = list(
        csv.reader(io.StringIO(run("route", "resolve", "--from", "tokyo", "-o", "csv", "--no-headers")))
    )
    assert [r[:2] for r in rows] == [["1", "osaka"], ["2", "tokyo"], ["3", "seoul"]]  # candidates only
    names = run("route", "resolve", "--from", "tokyo", "-o", "name").split()
    assert names == ["pool/osaka/o1/H100-80G", "pool/tokyo/t1/H100-80G", "pool/seoul/s1/H100-80G"]
    ranked = run("route", "resolve", "--from", "tokyo", "--sort-by", "rtt_ms", "--no-headers").splitlines()
    assert [line.split()[:2] for line in ranked[:3]] == [["2", "tokyo"], ["1", "osaka"], ["3", "seoul"]]
    assert "RANK" not in "".join(ranked) and "excluded:" not in "".join(ranked)
    wide = run("route", "resolve", "--from", "tokyo", "-o", "wide").splitlines()
    assert wide[1].split()[-7:] == ["GPU", "MODEL", "TOTAL", "CU", "LOSS", "GBPS", "LINK"]
    assert any(LONG_REASON.strip() in line for line in wide)  # the exclusions are not cut either
