"""The soak's pure parts (bench/soak.py): its readers of `suanli up`'s output, /proc and /metrics, and the
pass criteria on synthetic samples."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from suanli.platform.soak import report
from suanli.platform.soak.criteria import Criteria, Outcome, Sample, evaluate, failed, jobs_final
from suanli.platform.soak.sources import (
    cpu_seconds,
    interval,
    parse_metrics_ports,
    parse_progress,
    parse_scrape,
    quantile,
    vm_rss_mib,
)

CRITERIA = Criteria(warmup_s=60, memory_tolerance=0.10, lag_factor=2.0, lag_floor=500, window=3)
DONE = Outcome(submitted=120, unfinished=0)


def _run(rss: dict[str, list[float]], lag: dict[str, list[float]] | None = None) -> list[Sample]:
    """Samples every 10 s from 0 s, loaded throughout; series given from the warm-up's end (60 s) on."""
    steps = len(next(iter(rss.values())))
    samples = [Sample(t_s=t, phase="submitting", rss_mib={n: 999.0 for n in rss}) for t in range(0, 60, 10)]
    for i in range(steps):
        samples.append(
            Sample(
                t_s=60 + 10 * i,
                phase="submitting",
                rss_mib={n: series[i] for n, series in rss.items()},
                lag={g: series[i] for g, series in (lag or {}).items()},
            )
        )
    return samples


def test_flat_memory_bounded_lag_and_final_jobs_pass() -> None:
    samples = _run(
        {"scheduling": [200, 205, 198, 202, 207, 203, 201, 204]},
        {"scheduling": [40, 900, 10, 30, 1200, 20, 5, 0]},
    )

    verdicts = evaluate(samples, DONE, CRITERIA)

    assert failed(verdicts) == []
    assert [v.criterion for v in verdicts] == ["memory scheduling", "lag scheduling", "jobs final"]


def test_the_warm_up_is_left_out_of_the_memory_baseline() -> None:
    # 999 MiB during the warm-up (the _run helper), then flat at 100: flat.
    verdicts = evaluate(_run({"billing": [100] * 8}), DONE, CRITERIA)

    assert failed(verdicts) == []


def test_memory_growing_past_the_tolerance_names_the_process() -> None:
    samples = _run({"metering": [100, 101, 100, 104, 108, 112, 113, 114], "billing": [80] * 8})

    bad = failed(evaluate(samples, DONE, CRITERIA))

    assert [v.criterion for v in bad] == ["memory metering"]
    assert "100.0 -> 113.0 MiB (+13.0%" in bad[0].detail


def test_the_embedded_broker_is_reported_not_judged() -> None:
    # Tansu keeps every record in memory (ARCHITECTURE.md §3): its growth is shown, not failed.
    samples = _run({"tansu": [30, 35, 40, 45, 50, 55, 60, 65], "scheduling": [100] * 8})

    verdicts = evaluate(samples, DONE, CRITERIA)

    assert failed(verdicts) == []
    tansu = next(v for v in verdicts if v.criterion == "memory tansu")
    assert not tansu.judged
    assert tansu.detail.startswith("35.0 -> 60.0 MiB (+71.4%") and "+30.00 MiB/min" in tansu.detail


def test_one_high_sample_at_either_end_does_not_decide() -> None:
    # A collection in flight at the last sample: the median of the last three is what counts.
    samples = _run({"routing": [100, 100, 100, 100, 100, 100, 100, 140]})

    assert failed(evaluate(samples, DONE, CRITERIA)) == []


def test_too_few_steady_samples_fail_rather_than_pass() -> None:
    samples = _run({"serving": [100, 100, 100]})

    bad = failed(evaluate(samples, DONE, CRITERIA))

    assert [v.criterion for v in bad] == ["memory serving"]
    assert "too few" in bad[0].detail


def test_lag_growing_in_the_second_half_fails_and_a_small_lag_never_does() -> None:
    samples = _run(
        {"scheduling": [100] * 8},
        {"metering": [300, 400, 350, 420, 800, 1500, 2600, 4000], "routing": [0, 1, 0, 2, 100, 300, 499, 10]},
    )

    bad = failed(evaluate(samples, DONE, CRITERIA))

    assert [v.criterion for v in bad] == ["lag metering"]
    assert "max 420 in the first half, 4000 in the second (bound 840" in bad[0].detail


def test_drain_samples_are_not_judged() -> None:
    samples = _run({"scheduling": [100] * 8}, {"billing": [10] * 8})
    samples.append(Sample(t_s=140, phase="draining", rss_mib={"scheduling": 300}, lag={"billing": 9000}))

    assert failed(evaluate(samples, DONE, CRITERIA)) == []


def test_unfinished_jobs_fail_with_up_s_problems() -> None:
    verdict = jobs_final(Outcome(120, 3, ("3 job(s) not final 180s after submission stopped",)))

    assert not verdict.passed
    problem = "3 job(s) not final 180s after submission stopped"
    assert verdict.detail == f"117 of 120 final after the drain; {problem}"
    nothing = jobs_final(Outcome(0, 0, ("suanli up wrote no summary (exit code 1)",)))
    assert not nothing.passed
    assert nothing.detail == "no job was submitted; suanli up wrote no summary (exit code 1)"


def test_progress_lines_of_suanli_up_are_read_and_other_lines_ignored() -> None:
    line = (
        "  245s  submitting  submitted 48/120  pending 3  running 7  succeeded 35  failed 1  cancelled 2"
        "  placements 60  GPU util avg 41%  GPU now 38%  charges acme=0.1200"
    )

    progress = parse_progress(line)

    assert progress is not None
    assert (progress.phase, progress.submitted, progress.pending, progress.final) == ("submitting", 48, 3, 38)
    assert parse_progress("waiting for 100 nodes of demo-3regions.yaml to be Ready") is None


def test_the_metrics_line_gives_each_process_s_url() -> None:
    line = "/metrics on 127.0.0.1: billing :41001, fleet :41002, scheduling :41005\n"

    assert parse_metrics_ports(line) == {
        "billing": "http://127.0.0.1:41001/metrics",
        "fleet": "http://127.0.0.1:41002/metrics",
        "scheduling": "http://127.0.0.1:41005/metrics",
    }
    assert parse_metrics_ports("scheduler 127.0.0.1:50051, billing 127.0.0.1:50055") is None


def test_vm_rss_is_read_in_mib() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmRSS:\t  204800 kB\nThreads:\t9\n"

    assert vm_rss_mib(status) == 200.0
    assert vm_rss_mib("Name:\tzombie\n") is None


def test_cpu_time_is_read_from_proc_stat_even_with_a_space_in_the_name() -> None:
    stat = "4242 (python -m x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 100 0 0"

    assert cpu_seconds(stat, 100) == 3.0


PAGE = """\
# TYPE suanli_consumer_lag gauge
suanli_consumer_lag{group="scheduling",topic="node.snapshots"} 12.0
suanli_consumer_lag{group="scheduling",topic="tasks.lifecycle"} 3.0
suanli_consumer_lag{group="metering",topic="usage.samples"} 40.0
# TYPE suanli_outbox_pending gauge
suanli_outbox_pending 7.0
# TYPE suanli_placement_latency_seconds histogram
suanli_placement_latency_seconds_bucket{le="0.1",region="tokyo"} 2.0
suanli_placement_latency_seconds_bucket{le="1.0",region="tokyo"} 4.0
suanli_placement_latency_seconds_bucket{le="+Inf",region="tokyo"} 4.0
suanli_placement_latency_seconds_bucket{le="0.1",region="frankfurt"} 1.0
suanli_placement_latency_seconds_bucket{le="1.0",region="frankfurt"} 5.0
suanli_placement_latency_seconds_bucket{le="+Inf",region="frankfurt"} 6.0
suanli_placement_latency_seconds_count{region="tokyo"} 4.0
suanli_placement_latency_seconds_sum{region="tokyo"} 1.5
"""


def test_a_metrics_page_gives_lag_per_group_outbox_and_histograms_over_regions() -> None:
    scrape = parse_scrape(PAGE)

    assert scrape.lag == {"scheduling": 15.0, "metering": 40.0}
    assert scrape.outbox == 7.0
    assert scrape.histograms == {"suanli_placement_latency_seconds": {0.1: 3.0, 1.0: 9.0, math.inf: 10.0}}
    assert parse_scrape("").outbox is None


def test_interval_quantiles_interpolate_like_prometheus() -> None:
    before = {0.1: 3.0, 1.0: 9.0, math.inf: 10.0}
    now = {0.1: 13.0, 1.0: 19.0, math.inf: 20.0}

    window = interval(now, before)

    assert window == {0.1: 10.0, 1.0: 10.0, math.inf: 10.0}
    assert quantile(window, 0.5) == pytest.approx(0.05)
    assert quantile({0.1: 0.0, 1.0: 10.0, math.inf: 10.0}, 0.99) == pytest.approx(0.991)
    # Beyond the last finite bound: that bound, as histogram_quantile answers.
    assert quantile({0.1: 0.0, 1.0: 0.0, math.inf: 4.0}, 0.5) == 1.0
    assert quantile({0.1: 0.0, math.inf: 0.0}, 0.5) is None
    # A restarted process's counters start again: the new counts are the interval.
    assert interval({0.1: 1.0, math.inf: 2.0}, now) == {0.1: 1.0, math.inf: 2.0}


def test_the_report_files(tmp_path: Path) -> None:
    samples = _run({"scheduling": [100] * 8}, {"billing": [10] * 8})
    verdicts = evaluate(samples, DONE, CRITERIA)

    report.write_csv(tmp_path / "samples.csv", samples)
    report.write_summary(tmp_path / "summary.json", report.summary(samples, verdicts, CRITERIA, {"x": 1}))
    report.plot(tmp_path / "soak.png", samples, CRITERIA, "test")

    rows = list(csv.DictReader((tmp_path / "samples.csv").open()))
    assert len(rows) == len(samples)
    assert rows[-1]["rss_mib.scheduling"] == "100" and rows[-1]["lag.billing"] == "10"
    assert list(rows[0])[:4] == ["t_s", "phase", "rss_mib.scheduling", "lag.billing"]
    document = json.loads((tmp_path / "summary.json").read_text())
    assert document["passed"] is True and document["steady"]["samples"] == 8
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
