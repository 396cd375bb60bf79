"""`suanli simulate --mode inference`: the options of the inference simulator and its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from suanli.inference import report
from suanli.inference.runs import AUTOSCALERS, Scenario, compare, scenario
from suanli.inference.setup import load_service, load_trace, parse_client_weights
from suanli.resources.network import measured_network
from suanli.routing.domain.balancing import BALANCERS
from suanli.serving.domain.spec import ServiceSpecError
from suanli.serving.domain.trace import Trace, TraceError


def _names(text: str, known: tuple[str, ...], flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise typer.BadParameter(
            f"unknown {unknown or 'none given'}; known: {', '.join(known)}", param_hint=flag
        )
    return names


def _targets(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(
            f"targets are numbers, e.g. 4,8 (got {text!r})", param_hint="--kpa-targets"
        ) from None
    if any(v <= 0 for v in values):
        raise typer.BadParameter("targets must be above 0", param_hint="--kpa-targets")
    return values


def _window(trace: Trace, minutes: str) -> Trace:
    if not minutes:
        return trace
    lo, sep, hi = minutes.partition("-")
    try:
        start, end = float(lo), float(hi)
    except ValueError:
        raise typer.BadParameter(
            f"use START-END in minutes, e.g. 20-35 (got {minutes!r})", param_hint="--minutes"
        ) from None
    if not sep or end <= start or start < 0:
        raise typer.BadParameter(f"use START-END with START < END (got {minutes!r})", param_hint="--minutes")
    window = trace.window(start * 60, end * 60)
    if not len(window):
        raise typer.BadParameter(f"no requests in minutes {minutes}", param_hint="--minutes")
    return window.rebased(start * 60)


def run_inference(
    *,
    trace_path: Path | None,
    service_path: Path | None,
    balancers: str,
    autoscalers: str,
    kpa_targets: str,
    speed: float,
    minutes: str,
    client_weights: str,
    seeds: list[int],
    json_path: Path | None,
    out: Path | None,
) -> list[dict[str, Any]]:
    """Every balancer x autoscaler for each seed; prints one table per (seed, balancer)."""
    if not speed > 0:
        raise typer.BadParameter("must be above 0", param_hint="--speed")
    try:
        service = load_service(service_path)
        trace = _window(load_trace(trace_path), minutes).compressed(speed)
    except (ServiceSpecError, TraceError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        weights = parse_client_weights(client_weights, measured_network().regions)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--client-weights") from None
    wanted = _names(autoscalers, AUTOSCALERS, "--autoscaler")
    summaries = []
    for seed in seeds:
        sc = scenario(service, trace, weights, seed)
        for balancer in _names(balancers, BALANCERS, "--balancer"):
            comparison = compare(
                sc,
                balancer,
                ("static-peak", *[a for a in wanted if a != "static-peak"]),
                _targets(kpa_targets),
            )
            setup = _setup(sc, balancer, speed, minutes)
            summary = report.summarise(comparison, setup)
            summaries.append(summary)
            tag = f"{balancer}_seed{seed}"
            if out is not None:
                report.write_json(out / f"{tag}.json", summary)
                report.write_timelines(out, tag, comparison)
                report.plot(out, tag, comparison, sc.setup.tick_s)
            _print(summary, tag)
    if json_path is not None:
        report.write_json(json_path, {"runs": summaries})
    return summaries


def _setup(sc: Scenario, balancer: str, speed: float, minutes: str) -> dict[str, Any]:
    spec = sc.service.spec
    return {
        "service": spec.name,
        "model": spec.model,
        "gpu": f"{spec.gpus:g} x {spec.gpu_model}",
        "regions": list(spec.regions),
        "ttft_s": sc.setup.ttft_s,
        "tpot_s": sc.setup.tpot_s,
        "cold_start_s": sc.setup.cold_start_s,
        "balancer": balancer,
        "seed": sc.seed,
        "speed": speed,
        "minutes": minutes or "all",
        "requests": len(sc.trace),
    }


def _print(summary: dict[str, Any], tag: str) -> None:
    s = summary["setup"]
    table = Table(
        title=f"{tag}: {s['requests']} requests, {s['model']} on {s['gpu']}, static-peak "
        f"{summary['static_peak_replicas']} / static-mean {summary['static_mean_replicas']} replicas"
    )
    for column in ("run", *report.COLUMNS):
        table.add_column(column, justify="left" if column == "run" else "right")
    for label, r in summary["runs"].items():
        table.add_row(label, *report.cells(r))
    Console(width=160).print(table)
