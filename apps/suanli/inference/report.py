"""The simulator's figures: one row per run, the JSON summary, CSV timelines and PNG plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from suanli.inference.runs import Comparison
from suanli.inference.simulator import SimResult


def row(result: SimResult, peak_gpu_seconds: float) -> dict[str, Any]:
    """The metrics of one run; GPU-seconds also as a share of static-peak's."""
    served = ~np.isnan(result.e2e_s)
    e2e = result.e2e_s[served]
    ttft = result.ttft_s[served]

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q)) if len(values) else float("nan")

    return {
        "autoscaler": result.autoscaler,
        "balancer": result.balancer,
        "requests": result.requests,
        "slo_attainment_pct": 100 * result.attainment,
        "slo_misses": result.requests - result.slo_met,
        "ttft_p50_s": pct(ttft, 50),
        "ttft_p99_s": pct(ttft, 99),
        "e2e_p50_s": pct(e2e, 50),
        "e2e_p99_s": pct(e2e, 99),
        "gpu_seconds": result.gpu_seconds,
        "gpu_pct_of_static_peak": 100 * result.gpu_seconds / peak_gpu_seconds
        if peak_gpu_seconds
        else float("nan"),
        "scale_events": result.scale_events,
        "cold_starts": result.cold_starts,
        "dropped": result.dropped,
        "spilled": result.spilled,
    }


COLUMNS = (
    "SLO %",
    "misses",
    "TTFT p50 / p99 s",
    "e2e p50 / p99 s",
    "GPU-s",
    "% of static-peak",
    "scale events",
    "cold starts",
    "dropped",
)


def cells(r: dict[str, Any]) -> list[str]:
    """One run's `row` as the text of `COLUMNS` (the CLI's table and the benchmark's Markdown)."""
    return [
        f"{r['slo_attainment_pct']:.2f}",
        str(r["slo_misses"]),
        f"{r['ttft_p50_s']:.2f} / {r['ttft_p99_s']:.2f}",
        f"{r['e2e_p50_s']:.1f} / {r['e2e_p99_s']:.1f}",
        f"{r['gpu_seconds']:,.0f}",
        f"{r['gpu_pct_of_static_peak']:.1f}",
        str(r["scale_events"]),
        str(r["cold_starts"]),
        str(r["dropped"]),
    ]


def summarise(comparison: Comparison, setup: dict[str, Any]) -> dict[str, Any]:
    peak = next((r.gpu_seconds for k, r in comparison.results.items() if k == "static-peak"), None)
    if peak is None:
        raise ValueError("the comparison needs its static-peak run")
    return {
        "setup": setup,
        "static_peak_replicas": comparison.peak_replicas,
        "static_mean_replicas": comparison.mean_replicas,
        "runs": {label: row(r, peak) for label, r in comparison.results.items()},
    }


def write_json(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def write_timelines(out: Path, tag: str, comparison: Comparison) -> None:
    """Per run: t, ready and starting replicas, arrivals in the tick; and the scaling decisions explained."""
    out.mkdir(parents=True, exist_ok=True)
    for label, result in comparison.results.items():
        with (out / f"{tag}_{label}_timeline.csv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["t_s", "ready", "starting", "arrivals"])
            writer.writerows(result.timeline)
        (out / f"{tag}_{label}_decisions.txt").write_text(
            "".join(d.explain() + "\n" for d in result.decisions), encoding="utf-8"
        )


def plot(out: Path, tag: str, comparison: Comparison, tick_s: float) -> list[Path]:
    """Replicas over time against the arrival rate, and the end-to-end latency CDF, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    first = next(iter(comparison.results.values()))
    t = np.array([p[0] for p in first.timeline]) / 60
    arrivals = np.array([p[3] for p in first.timeline]) / tick_s
    window = max(1, int(30 / tick_s))
    trailing = np.convolve(arrivals, np.ones(window) / window, mode="full")[: len(arrivals)]
    top.plot(t, trailing, color="black")
    top.set_ylabel("arrivals / s (trailing 30 s)")
    top.set_title(f"{tag}: load and replicas (ready + starting)")
    for label, result in comparison.results.items():
        tt = np.array([p[0] for p in result.timeline]) / 60
        bottom.plot(tt, [p[1] + p[2] for p in result.timeline], label=label, linewidth=1)
    bottom.set_xlabel("minutes into the trace")
    bottom.set_ylabel("replicas")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    replicas = out / f"{tag}_replicas.png"
    fig.savefig(replicas, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, result in comparison.results.items():
        e2e = np.sort(result.e2e_s[~np.isnan(result.e2e_s)])
        ax.plot(e2e, np.arange(1, len(e2e) + 1) / result.requests, label=label, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("end-to-end latency (s, log)")
    ax.set_ylabel("share of requests served within")
    ax.set_title(f"{tag}: end-to-end latency CDF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    cdf = out / f"{tag}_latency_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    return [replicas, cdf]
