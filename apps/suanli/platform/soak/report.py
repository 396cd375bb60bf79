"""The soak's files: the samples as CSV (one column per process, group and relay), a JSON summary with
the verdicts, and a PNG of every series against time."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from suanli.platform.soak.criteria import LOAD_PHASE, Criteria, Sample, Verdict

KEYED = ("rss_mib", "cpu_pct", "lag", "outbox")
SCALARS = (
    "placement_p50_s",
    "placement_p99_s",
    "cycle_p50_s",
    "cycle_p99_s",
    "submitted",
    "final",
    "load1",
)


def columns(samples: Sequence[Sample]) -> list[str]:
    """``t_s``, ``phase``, then ``rss_mib.<process>``, ``cpu_pct.<process>``, ``lag.<group>``,
    ``outbox.<process>``, the rest."""
    keyed = [
        f"{kind}.{name}" for kind in KEYED for name in sorted({n for s in samples for n in getattr(s, kind)})
    ]
    return ["t_s", "phase", *keyed, *SCALARS]


def row(sample: Sample, names: Sequence[str]) -> list[str]:
    cells = []
    for name in names:
        kind, _, key = name.partition(".")
        value = getattr(sample, kind).get(key) if key else getattr(sample, name)
        cells.append("" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value))
    return cells


def write_csv(path: Path, samples: Sequence[Sample]) -> None:
    names = columns(samples)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows(row(s, names) for s in samples)


def summary(
    samples: Sequence[Sample], verdicts: Sequence[Verdict], criteria: Criteria, run: dict[str, Any]
) -> dict[str, Any]:
    """The run's settings, its figures over the steady load and every verdict."""
    loaded = [s for s in samples if s.phase == LOAD_PHASE and s.t_s >= criteria.warmup_s]

    def peak(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return {
        "run": run,
        "criteria": asdict(criteria),
        "passed": all(v.passed for v in verdicts),
        "verdicts": [asdict(v) for v in verdicts],
        "steady": {
            "samples": len(loaded),
            "placement_p99_s_max": peak([s.placement_p99_s for s in loaded]),
            "cycle_p99_s_max": peak([s.cycle_p99_s for s in loaded]),
            "outbox_max": {
                name: max(s.outbox[name] for s in loaded if name in s.outbox)
                for name in sorted({n for s in loaded for n in s.outbox})
            },
        },
    }


def write_summary(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def plot(path: Path, samples: Sequence[Sample], criteria: Criteria, title: str) -> None:
    """RSS, CPU, consumer lag, outbox depth, latency and jobs against minutes; warm-up and drain shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(6, 1, figsize=(8, 13), sharex=True)
    minutes = [s.t_s / 60 for s in samples]
    labels = ("RSS (MiB)", "CPU (% of a core)", "consumer lag (records)", "outbox rows pending")
    for ax, kind, label in zip(axes, KEYED, labels, strict=False):
        for name in sorted({n for s in samples for n in getattr(s, kind)}):
            ax.plot(minutes, [getattr(s, kind).get(name) for s in samples], label=name, linewidth=1)
        ax.set_ylabel(label)
    latency, jobs = axes[4], axes[5]
    for name, label in (
        ("placement_p50_s", "submit->placed p50"),
        ("placement_p99_s", "submit->placed p99"),
        ("cycle_p99_s", "scheduling cycle p99"),
    ):
        latency.plot(minutes, [getattr(s, name) for s in samples], label=label, linewidth=1)
    latency.set_yscale("log")
    latency.set_ylabel("seconds (per interval)")
    jobs.plot(minutes, [s.submitted for s in samples], label="submitted", linewidth=1)
    jobs.plot(minutes, [s.final for s in samples], label="final", linewidth=1)
    jobs.set_ylabel("jobs")
    load = jobs.twinx()
    load.plot(minutes, [s.load1 for s in samples], color="grey", linewidth=0.8, linestyle=":")
    load.set_ylabel("load average (1 min, dotted)", fontsize=7)
    jobs.set_xlabel("minutes since the load began")
    loaded = [s.t_s / 60 for s in samples if s.phase == LOAD_PHASE]
    for ax in axes:
        if ax.get_lines():
            ax.legend(fontsize=6, ncol=3, loc="upper left")
        ax.axvspan(min(minutes, default=0), criteria.warmup_s / 60, color="grey", alpha=0.15)
        if loaded:
            ax.axvspan(max(loaded), max(minutes), color="grey", alpha=0.15)
    axes[0].set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
