"""The inference simulator on a slice of the Azure trace: accounting, determinism, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from suanli.cli.main import app
from suanli.data import data_path
from suanli.inference.runs import autoscaler_for, compare, peak_minute, right_sized, run, scenario
from suanli.inference.setup import CLIENT_WEIGHTS, load_service, load_trace
from suanli.serving.domain.autoscaling import Fixed
from suanli.serving.domain.spec import ServiceSpecError
from suanli.serving.domain.trace import parse_trace

# Minutes 26-29 hold the trace's busiest stretch (432-480 requests a minute).
START, END = 26 * 60, 29 * 60


@pytest.fixture(scope="module")
def sc():  # type: ignore[no-untyped-def]
    trace = load_trace().window(START, END).rebased(START)
    return scenario(load_service(), trace, CLIENT_WEIGHTS, seed=7)


def test_a_static_run_accounts_for_every_request_and_its_gpu_time(sc) -> None:  # type: ignore[no-untyped-def]
    result = run(sc, Fixed(12), "least-outstanding", 12)
    assert result.requests == len(sc.trace) > 1000
    assert result.served + result.dropped == result.requests
    assert result.slo_met == int(result.met.sum()) <= result.served
    span = float(sc.trace.offset_s[-1])
    assert result.gpu_seconds == pytest.approx(12 * 0.5 * span)
    assert result.scale_events == 0 and result.cold_starts == 0
    served = ~np.isnan(result.e2e_s)
    assert np.all(result.ttft_s[served] > 0) and np.all(result.e2e_s[served] >= result.ttft_s[served])


def test_more_replicas_never_serve_worse(sc) -> None:  # type: ignore[no-untyped-def]
    few, many = (run(sc, Fixed(n), "least-outstanding", n) for n in (6, 18))
    assert few.attainment < many.attainment
    assert many.attainment > 0.97


def test_the_same_seed_gives_the_same_run(sc) -> None:  # type: ignore[no-untyped-def]
    first = run(sc, autoscaler_for("slo", sc), "power-of-two", 8)
    again = run(sc, autoscaler_for("slo", sc), "power-of-two", 8)
    assert first.slo_met == again.slo_met and first.gpu_seconds == again.gpu_seconds
    assert np.array_equal(first.e2e_s, again.e2e_s, equal_nan=True)


def test_autoscalers_scale_with_cold_starts_and_explain_each_decision(sc) -> None:  # type: ignore[no-untyped-def]
    for name in ("kpa", "slo"):
        result = run(sc, autoscaler_for(name, sc), "network-aware", 6)
        assert result.scale_events == len(result.decisions) > 0
        assert result.cold_starts > 0
        assert all(d.desired != d.current and d.explain().startswith("t=") for d in result.decisions)
        assert max(ready + starting for _, ready, starting, _ in result.timeline) > 6


def test_network_aware_serves_most_requests_from_the_home_region(sc) -> None:  # type: ignore[no-untyped-def]
    result = run(sc, Fixed(15), "network-aware", 15)
    assert 0 <= result.spilled < result.requests / 2
    assert result.attainment >= run(sc, Fixed(15), "round-robin", 15).attainment


def test_compare_sizes_static_peak_first_and_reports_every_run(sc) -> None:  # type: ignore[no-untyped-def]
    comparison = compare(sc, "least-outstanding", ("static-peak", "static-mean", "slo"))
    assert set(comparison.results) == {"static-peak", "static-mean", "slo"}
    assert comparison.mean_replicas <= comparison.peak_replicas
    peak = comparison.results["static-peak"]
    assert peak.gpu_seconds == pytest.approx(comparison.peak_replicas * 0.5 * float(sc.trace.offset_s[-1]))
    # The smallest count: one fewer misses the target in the busiest minute.
    minute, _ = peak_minute(sc.trace)
    busiest = (sc.trace.offset_s >= minute * 60) & (sc.trace.offset_s < (minute + 1) * 60)
    assert peak.met[busiest].mean() >= 0.99
    fewer = run(sc, Fixed(comparison.peak_replicas - 1), "least-outstanding", comparison.peak_replicas - 1)
    assert fewer.met[busiest].mean() < 0.99


def test_the_cli_runs_the_inference_mode_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--mode",
            "inference",
            "--minutes",
            "27-28",
            "--autoscaler",
            "slo",
            "--seeds",
            "3",
            "--balancer",
            "least-outstanding",
            "--speed",
            "2",
            "--json",
            str(tmp_path / "s.json"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "s.json").read_text())["runs"][0]
    assert set(summary["runs"]) == {"static-peak", "slo"}
    assert summary["setup"]["speed"] == 2.0 and summary["setup"]["minutes"] == "27-28"
    assert (out / "least-outstanding_seed3_replicas.png").stat().st_size > 1000
    assert (out / "least-outstanding_seed3_slo_decisions.txt").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--balancer", "random"], "unknown ['random']"),
        (["--autoscaler", "hpa"], "unknown ['hpa']"),
        (["--speed", "0"], "must be above 0"),
        (["--minutes", "30-20"], "START < END"),
        (["--client-weights", "mars=1"], "unknown region 'mars'"),
        (["--kpa-targets", "x"], "targets are numbers"),
    ],
)
def test_the_cli_refuses_bad_options_with_the_reason(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["simulate", "--mode", "inference", "--minutes", "27-28", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_scale_to_zero_buffers_requests_at_the_gateway_through_a_cold_start(tmp_path: Path) -> None:
    spec = data_path("deploy/services/chat.yaml").read_text()
    spec = spec.replace("min_replicas: 3", "min_replicas: 0").replace(
        "scale_to_zero: false", "scale_to_zero: true"
    )
    spec = spec.replace("cold_start_s: 60 ", "cold_start_s: 10 ").replace("spread: regions", "spread: none")
    (tmp_path / "zero.yaml").write_text(spec)
    service = load_service(tmp_path / "zero.yaml")
    # Ten requests, then 200 s of silence, then ten more: the service should go to zero and come back.
    rows = [f"2023-11-16 18:00:{s:02d}.0,500,20" for s in range(10)]
    rows += [f"2023-11-16 18:03:{30 + s:02d}.0,500,20" for s in range(10)]
    trace = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    sc = scenario(service, trace, CLIENT_WEIGHTS, seed=1)
    result = run(sc, autoscaler_for("kpa", sc), "network-aware", 1)
    assert min(ready + starting for _, ready, starting, _ in result.timeline) == 0
    assert result.cold_starts >= 1
    assert result.dropped == 0 and result.served == 20
    late = result.ttft_s[10:]
    assert late.max() >= 10.0 - 1.0  # the first of them waited out the cold start at the gateway
    assert any(d.desired == 0 for d in result.decisions)


def test_right_sizing_weighs_shares_from_the_first_minutes_and_reruns_the_service() -> None:
    service = load_service()
    options = right_sized(service, load_trace())
    spec_share = next(o for o in options if o.gpus == service.spec.gpus)
    assert options[0].per_gpu >= spec_share.per_gpu
    assert spec_share.limit == "kv-cache"  # half an A100 leaves the 13B model ~10 GiB of cache
    resized = load_service(gpu=options[0].gpus)
    assert resized.spec.gpus == options[0].gpus and resized.speed == options[0].speed
    assert resized.spec.max_batch == service.spec.max_batch  # only the share changes


def test_a_share_that_cannot_hold_the_model_is_refused_like_the_spec() -> None:
    with pytest.raises(ServiceSpecError, match=r"resources.gpu: llama-2-13b needs 24.2 GiB of weights"):
        load_service(gpu=0.25)
