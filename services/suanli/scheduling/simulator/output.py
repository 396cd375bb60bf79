"""Writing run results: one CSV per run, PNG curves per workload, and the JSON summary."""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suanli.scheduling.simulator.multiregion import MultiRegionResult
from suanli.scheduling.simulator.runner import RunResult
from suanli.scheduling.simulator.timeline import TimelineResult


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_run_csv(out: Path, workload: str, run: RunResult) -> Path:
    path = out / f"{workload}_{run.policy}_seed{run.seed}.csv"
    c = run.curves
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrived_pct", "allocation_pct", "unallocated_pct", "frag_pct", "frag_rate_pct"])
        for x in range(c.allocation_pct.size):
            w.writerow(
                [
                    x,
                    *(
                        f"{v:.4f}"
                        for v in (
                            c.allocation_pct[x],
                            c.unallocated_pct[x],
                            c.frag_pct[x],
                            c.frag_rate_pct[x],
                        )
                    ),
                ]
            )
    return path


def write_timeline_csv(out: Path, workload: str, run: TimelineResult) -> Path:
    path = out / f"{workload}_{run.policy}_seed{run.seed}_timeline.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_s", "allocation_pct", "queue_length"])
        for t, a, q in zip(run.times, run.allocation_pct, run.queue_length, strict=True):
            w.writerow([int(t), f"{a:.4f}", int(q)])
    return path


def plot_arrivals(out: Path, workload: str, results: Sequence[RunResult], policies: Sequence[str]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_u, ax_f) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy in policies:
        runs = [r for r in results if r.policy == policy]
        if not runs:
            continue
        # Bins before the first arrival are NaN in every run; the median of nothing is simply not drawn.
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            unalloc = np.nanmedian(np.vstack([r.curves.unallocated_pct for r in runs]), axis=0)
            frag = np.nanmedian(np.vstack([r.curves.frag_pct for r in runs]), axis=0)
        xs = np.arange(unalloc.size)
        ax_u.plot(xs, unalloc, label=policy)
        ax_f.plot(xs, frag, label=policy)
    ax_u.set(
        xlim=(75, 130),
        ylim=(0, 25),
        xlabel="arrived workload (% of GPU capacity)",
        ylabel="unallocated GPU (%)",
        title=f"{workload}: unallocated GPU (median over seeds)",
    )
    ax_f.set(
        xlabel="arrived workload (% of GPU capacity)",
        ylabel="fragmentation / capacity (%)",
        title=f"{workload}: GPU fragmentation",
    )
    for ax in (ax_u, ax_f):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = out / f"{workload}_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timeline(out: Path, workload: str, results: Sequence[TimelineResult]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_a, ax_q) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    for run in results:
        hours = run.times / 3600
        ax_a.plot(hours, run.allocation_pct, label=f"{run.policy} s{run.seed}", lw=0.8)
        ax_q.plot(hours, run.queue_length, label=f"{run.policy} s{run.seed}", lw=0.8)
    ax_a.set(ylabel="GPU allocation (%)", title=f"{workload}: timeline replay")
    ax_q.set(xlabel="hours", ylabel="queued pods")
    for ax in (ax_a, ax_q):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / f"{workload}_timeline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_multiregion_csv(out: Path, workload: str, runs: Sequence[MultiRegionResult]) -> Path:
    """One row per (policy, seed) with every metric of the run."""
    path = out / f"{workload}_multiregion.csv"
    names = sorted({k for r in runs for k in r.metrics})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "seed", *names, "seconds"])
        for r in sorted(runs, key=lambda r: (r.policy, r.seed)):
            w.writerow([r.policy, r.seed, *(f"{r.metrics[k]:.4f}" for k in names), f"{r.seconds:.2f}"])
    return path


def plot_multiregion(
    out: Path, workload: str, results: Sequence[MultiRegionResult], policies: Sequence[str]
) -> Path:
    """RTT to the data region of placed jobs (CDF, all seeds pooled) and unallocated GPU % against
    arrived workload (median over seeds), one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_r, ax_u) = plt.subplots(1, 2, figsize=(11, 4))
    for policy in policies:
        runs = [r for r in results if r.policy == policy]
        if not runs:
            continue
        rtts = np.sort(np.concatenate([r.rtt_ms for r in runs]))
        if rtts.size:
            ax_r.plot(rtts, np.arange(1, rtts.size + 1) / rtts.size * 100, label=policy)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            unalloc = np.nanmedian(np.vstack([r.unallocated_pct for r in runs]), axis=0)
        ax_u.plot(np.arange(unalloc.size), unalloc, label=policy)
    ax_r.set(
        xlabel="RTT to the data region (ms)",
        ylabel="placed jobs (%, cumulative)",
        title=f"{workload}, 10 regions: RTT of placed jobs",
    )
    ax_u.set(
        xlim=(75, 130),
        ylim=(0, 25),
        xlabel="arrived workload (% of GPU capacity)",
        ylabel="unallocated GPU (%)",
        title=f"{workload}, 10 regions: unallocated GPU (median)",
    )
    for ax in (ax_r, ax_u):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = out / f"{workload}_multiregion.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
