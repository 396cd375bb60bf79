"""`suanli simulate`: replay an openb trace against placement policies (the FGD paper's experiment).

    suanli simulate --pods traces/openb/openb_pod_list_default.csv --policy fgd,bestfit,fgdb \\
        --seeds 42-51 --tune 1.3 --json out/default.json --out out/default

    suanli simulate --mode multiregion --pods traces/openb/openb_pod_list_default.csv \\
        --seeds 42-51 --json out/multiregion.json --out out/multiregion

    suanli simulate --mode inference --balancer network-aware,least-outstanding --out out/inference

    suanli simulate --fleet deploy/fleets/small.yaml --jobs examples/jobs --policy fgdb,bestfit \\
        --seeds 42-44 --json out/whatif.json --out out/whatif

The workload name in the JSON is the pod file's stem with the `openb_pod_list_` prefix removed
(`openb_pod_list_default.csv` -> `default`). The multi-region mode spreads the nodes over the 10 measured
regions and compares region-blind, nearest-first and network-aware placement (docs/scheduling.md,
"Multi-region simulation"). The inference mode replays the Azure LLM trace through balancing policy x
autoscaler x regions (docs/inference.md). With `--fleet` and `--jobs` it replays your own job specs on
your own fleet file through the live scheduler's cycle (docs/simulate.md, `simulator/whatif.py`).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from suanli.cli.client import EXIT_USAGE, Failure, fail
from suanli.data import data_path

_R = TypeVar("_R")

console = Console(stderr=True)
DEFAULT_NODES = data_path("traces/openb/openb_node_list_gpu_node.csv")
MODES = ("arrivals", "timeline", "multiregion", "inference")
ARRIVALS = "arrivals"
MULTIREGION = "multiregion"
INFERENCE = "inference"


def parse_seeds(text: str) -> list[int]:
    """`42-51`, `42,43` or a mix (`1,5-7`) -> sorted unique seeds."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.update(range(a, b + 1))
            else:
                seeds.add(int(part))
        except ValueError:
            raise typer.BadParameter(f"bad seed or range {part!r} (use 42-51 or 42,43)") from None
    if not seeds:
        raise typer.BadParameter("no seeds given")
    return sorted(seeds)


def _list_policies() -> None:
    from suanli.scheduling.domain.plugins.policies import POLICIES

    table = Table(title="placement policies")
    table.add_column("policy")
    table.add_column("description")
    for name, profile in POLICIES.items():
        table.add_row(name, profile.get("description", ""))
    from suanli.scheduling.simulator.multiregion import REGION_POLICIES

    for name, text in REGION_POLICIES.items():
        table.add_row(name, f"--mode multiregion only: {text}")
    Console().print(table)


def simulate(
    pods: Annotated[
        Path | None, typer.Option("--pods", help="Pod list CSV (openb format).", dir_okay=False)
    ] = None,
    nodes: Annotated[Path, typer.Option("--nodes", help="Node list CSV (openb format).", dir_okay=False)] = (
        DEFAULT_NODES
    ),
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="Comma-separated policies (--list-policies); default fgd, or in multiregion mode "
            "region-blind,nearest-first,network-aware.",
        ),
    ] = None,
    seeds: Annotated[str, typer.Option("--seeds", help="Seeds: a range 42-51 and/or a list 42,43.")] = "42",
    tune: Annotated[
        float, typer.Option("--tune", help="Inflate arrivals to this multiple of GPU capacity.")
    ] = 1.3,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the JSON summary here.", dir_okay=False)
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for per-run CSVs and PNG curves.")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Parallel processes (0 = number of CPUs).")] = 0,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="arrivals (paper experiment), timeline (pods leave), multiregion (the nodes over the 10 "
            "measured regions, jobs with data regions and RTT bounds; placed %, unallocated GPU %, RTT to "
            "the data region, cost per GPU-hour, gangs split across regions) or inference (the Azure LLM "
            "trace through balancer x autoscaler x regions; SLO attainment, latency, GPU-seconds; "
            "docs/inference.md).",
        ),
    ] = ("arrivals"),
    region_weights: Annotated[
        str,
        typer.Option(
            "--region-weights",
            help="multiregion: node share per region, e.g. dallas=2,tokyo=0 (default even).",
        ),
    ] = "",
    data_weights: Annotated[
        str,
        typer.Option(
            "--data-weights",
            help="multiregion: data-region draw weights over the default (hubs dallas, washington-dc, "
            "frankfurt, tokyo 2, others 1).",
        ),
    ] = "",
    bound_share: Annotated[
        float,
        typer.Option("--bound-share", help="multiregion: share of jobs with max_rtt_ms (40 or 150 ms)."),
    ] = 0.5,
    pricebook: Annotated[
        Path | None,
        typer.Option(
            "--pricebook",
            help="multiregion: price book YAML for costs (default the shipped one).",
            dir_okay=False,
        ),
    ] = None,
    list_policies: Annotated[
        bool, typer.Option("--list-policies", help="List the policies and exit.")
    ] = False,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="inference: request trace CSV (default the Azure conversation trace).",
            dir_okay=False,
        ),
    ] = None,
    service: Annotated[
        Path | None,
        typer.Option(
            "--service",
            help="inference: service spec YAML (default deploy/services/chat.yaml).",
            dir_okay=False,
        ),
    ] = None,
    balancer: Annotated[
        str,
        typer.Option(
            "--balancer",
            help="inference: comma-separated balancers: round-robin, least-outstanding, power-of-two, "
            "network-aware.",
        ),
    ] = "network-aware",
    autoscaler: Annotated[
        str,
        typer.Option(
            "--autoscaler",
            help="inference: comma-separated runs: static-peak, static-mean, kpa, slo (static-peak always "
            "runs).",
        ),
    ] = "static-peak,static-mean,kpa,slo",
    kpa_targets: Annotated[
        str,
        typer.Option(
            "--kpa-targets",
            help="inference: KPA target concurrencies to sweep, e.g. 4,6,8,10 (default the spec's).",
        ),
    ] = "",
    speed: Annotated[
        float,
        typer.Option("--speed", help="inference: time compression: inter-arrival times divided by this."),
    ] = 1.0,
    minutes: Annotated[
        str,
        typer.Option("--minutes", help="inference: replay only minutes START-END of the trace, e.g. 20-35."),
    ] = "",
    client_weights: Annotated[
        str,
        typer.Option(
            "--client-weights",
            help="inference: clients per region, e.g. dallas=2,tokyo=1 (default docs/inference.md).",
        ),
    ] = "",
    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="what-if: a fleet file (deploy/fleets/*.yaml) to replay --jobs on (not an openb trace).",
        ),
    ] = None,
    job_specs: Annotated[
        Path | None,
        typer.Option(
            "--jobs",
            help="what-if: a job spec YAML file or a directory of them (*.yaml); an entry is a job spec or "
            "{at: SECONDS, duration: D, copies: N, job: SPEC} (docs/simulate.md).",
        ),
    ] = None,
    queues: Annotated[
        Path | None,
        typer.Option(
            "--queues",
            help="what-if: queue configuration (as serve scheduling --queues); default one queue, no quota.",
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            help="what-if: jobs without `at` arrive as a seeded Poisson process of this many jobs/s "
            "(default: at t=0).",
        ),
    ] = None,
) -> None:
    """Replay a pod list against placement policies; report unallocated GPU % vs arrived workload.

    `--mode multiregion` spreads the nodes over the 10 measured regions and compares region-blind,
    nearest-first and network-aware placement (placed %, RTT to the data region, cost, split gangs).
    `--mode inference` replays the Azure LLM inference trace instead (no `--pods`): load balancer x
    autoscaler x regions against static and KPA-like baselines (docs/inference.md).
    `--fleet FILE --jobs DIR_OR_FILE` (what-if) replays your job specs on your fleet file through the live
    scheduler's cycle and queues: GPU allocation over time, jobs placed / waited / never placed (with
    reasons), wait mean and p95, unallocated GPU % (docs/simulate.md).
    """
    from suanli.scheduling.simulator import batch, output
    from suanli.scheduling.simulator.runner import RunResult
    from suanli.scheduling.simulator.timeline import TimelineResult
    from suanli.scheduling.simulator.traces import workload_name

    if list_policies:
        _list_policies()
        raise typer.Exit()
    if fleet is not None or job_specs is not None:
        _whatif(
            fleet, job_specs, queues, rate, policy, parse_seeds(seeds), json_path, out, pods=pods, mode=mode
        )
        return
    if mode == INFERENCE:
        from suanli.inference.cli import run_inference

        run_inference(
            trace_path=trace,
            service_path=service,
            balancers=balancer,
            autoscalers=autoscaler,
            kpa_targets=kpa_targets,
            speed=speed,
            minutes=minutes,
            client_weights=client_weights,
            seeds=parse_seeds(seeds),
            json_path=json_path,
            out=out,
        )
        return
    pods, names = _checked(pods, nodes, policy, mode)
    seed_list = parse_seeds(seeds)
    workload = workload_name(pods)
    setup = _setup(region_weights, data_weights, bound_share, pricebook) if mode == MULTIREGION else None
    jobs = [
        batch.Job(nodes.resolve(), pods.resolve(), p, s, tune, mode, setup) for p in names for s in seed_list
    ]
    results = _run(jobs, workers or os.cpu_count() or 1, f"[bold]{workload}[/] {mode}")

    if setup is not None:
        _write_multiregion(results, workload, names, setup, json_path, out)
        return
    if mode == "timeline":
        timelines = _all_of(results, TimelineResult)
        summary = batch.summarise_timeline(workload, timelines, names)
    else:
        runs = _all_of(results, RunResult)
        summary = batch.summarise_arrivals(workload, runs, names)
    if json_path is not None:
        output.write_json(json_path, summary)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        output.write_json(out / f"{workload}_summary.json", summary)
        if mode == "timeline":
            for timeline in timelines:
                output.write_timeline_csv(out, workload, timeline)
            output.plot_timeline(out, workload, timelines)
        else:
            for run in runs:
                output.write_run_csv(out, workload, run)
            output.plot_arrivals(out, workload, runs, names)
    _print_summary(summary, mode)


def _setup(region_weights: str, data_weights: str, bound_share: float, pricebook: Path | None) -> Any:
    """The multi-region setup from the flags, or the usage error naming the flag."""
    from suanli.resources.network import measured_network
    from suanli.scheduling.simulator.geography import even_weights, hub_weights, parse_weights
    from suanli.scheduling.simulator.multiregion import MultiRegionSetup

    regions = measured_network().regions
    weights = {}
    for flag, text, base in (
        ("--region-weights", region_weights, even_weights(regions)),
        ("--data-weights", data_weights, hub_weights(regions)),
    ):
        try:
            weights[flag] = tuple(sorted(parse_weights(text, regions, base).items()))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=flag) from None
    if not 0.0 <= bound_share <= 1.0:
        raise typer.BadParameter("a share is 0..1", param_hint="--bound-share")
    if pricebook is not None and not pricebook.is_file():
        raise typer.BadParameter(f"{pricebook} does not exist", param_hint="--pricebook")
    return MultiRegionSetup(weights["--region-weights"], weights["--data-weights"], bound_share, pricebook)


def _write_multiregion(
    results: list[Any], workload: str, names: list[str], setup: Any, json_path: Path | None, out: Path | None
) -> None:
    from suanli.scheduling.simulator import batch, output
    from suanli.scheduling.simulator.multiregion import MultiRegionResult

    runs = _all_of(results, MultiRegionResult)
    summary = batch.summarise_multiregion(workload, runs, names, setup)
    if json_path is not None:
        output.write_json(json_path, summary)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        output.write_json(out / f"{workload}_multiregion_summary.json", summary)
        output.write_multiregion_csv(out, workload, runs)
        output.plot_multiregion(out, workload, runs, names)
    _print_multiregion(summary)


def _print_multiregion(summary: dict[str, Any]) -> None:
    table = Table(title=f"{summary['workload']} (multiregion, {len(summary['setup']['regions'])} regions)")
    for column in (
        "policy",
        "placed %",
        "unalloc % @100",
        "RTT mean ms",
        "RTT p99 ms",
        "cost/GPU-h",
        "split",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in summary["results"].items():
        table.add_row(
            name,
            f"{r['placed_pct']['mean']:.2f}",
            f"{r['unallocated_pct_at_100']['mean']:.2f} ± {r['unallocated_pct_at_100']['sd']:.2f}",
            f"{r['rtt_mean_ms']['mean']:.1f}",
            f"{r['rtt_p99_ms']['mean']:.1f}",
            f"{r['cost_per_gpu_hour']['mean']:.3f} {r['currency']}",
            f"{sum(r['split_gangs']['per_seed']):.0f}",
        )
    Console().print(table)


def _checked(pods: Path | None, nodes: Path, policy: str | None, mode: str) -> tuple[Path, list[str]]:
    """The pod list and the policy names, or the usage error a person should see."""
    from suanli.scheduling.domain.plugins.policies import POLICIES
    from suanli.scheduling.simulator.multiregion import REGION_POLICIES

    if pods is None:
        raise typer.BadParameter("--pods is required", param_hint="--pods")
    for path in (nodes, pods):
        if not path.is_file():
            raise typer.BadParameter(f"{path} does not exist")
    _check_csv(pods, POD_COLUMNS, "--pods")
    _check_csv(nodes, NODE_COLUMNS, "--nodes")
    if mode not in MODES:
        raise typer.BadParameter(f"mode must be one of {MODES}", param_hint="--mode")
    known = list(REGION_POLICIES) if mode == MULTIREGION else list(POLICIES)
    if policy is None:
        policy = ",".join(REGION_POLICIES) if mode == MULTIREGION else "fgd"
    names = [p.strip() for p in policy.split(",") if p.strip()]
    unknown = [p for p in names if p not in known]
    if not names or unknown:
        raise typer.BadParameter(
            f"unknown policy {unknown} for mode {mode}; known: {', '.join(known)}", param_hint="--policy"
        )
    return pods, names


# The columns the openb readers (simulator/traces.py) cannot do without.
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu")


def _check_csv(path: Path, columns: tuple[str, ...], flag: str) -> None:
    """A one-line usage error for a file the openb readers would fail on half-way (a job spec YAML given
    as --pods, a CSV without the openb header)."""
    if path.suffix.lower() in (".yaml", ".yml"):
        raise fail(
            Failure(
                f"{path}: {flag} takes an openb CSV, not YAML; to replay job specs use "
                "--fleet FLEET.yaml --jobs DIR_OR_FILE",
                EXIT_USAGE,
            )
        )
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(Failure(f"{path}: cannot read {flag}: {exc}", EXIT_USAGE)) from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise fail(
            Failure(f"{path}: not an openb {flag[2:]} CSV: the header lacks {', '.join(missing)}", EXIT_USAGE)
        )


def _whatif(
    fleet: Path | None,
    jobs_path: Path | None,
    queues: Path | None,
    rate: float | None,
    policy: str | None,
    seed_list: list[int],
    json_path: Path | None,
    out: Path | None,
    *,
    pods: Path | None,
    mode: str,
) -> None:
    """The what-if mode: inputs checked (one-line errors, exit 2), every policy x seed replayed, the openb
    modes' writers for the summary, the per-run timeline CSVs and the PNG."""
    if pods is not None or mode != ARRIVALS:
        raise fail(Failure("--fleet/--jobs replay job specs; they take no --pods and no --mode", EXIT_USAGE))
    if fleet is None or jobs_path is None:
        raise fail(Failure("the what-if mode needs both --fleet FILE and --jobs DIR_OR_FILE", EXIT_USAGE))
    from suanli.cli.whatif import WhatIfInputError, load_inputs
    from suanli.scheduling.adapters.framework_placer import DEFAULT_POLICY
    from suanli.scheduling.domain.plugins.policies import POLICIES
    from suanli.scheduling.simulator import output
    from suanli.scheduling.simulator.whatif import run_whatif, summarise_whatif, write_jobs_csv

    names = [p.strip() for p in (policy or DEFAULT_POLICY).split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if not names or unknown:
        raise fail(Failure(f"--policy: unknown policy {unknown}; known: {', '.join(POLICIES)}", EXIT_USAGE))
    try:
        inputs = load_inputs(fleet, jobs_path, queues, rate, names[0])
    except WhatIfInputError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    workload = jobs_path.stem or jobs_path.resolve().name
    runs = [(p, s) for p in names for s in seed_list]
    with Progress(
        TextColumn(f"[bold]{workload}[/] on {inputs.fleet}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("runs", total=len(runs))
        results = []
        for p, s in runs:
            results.append(run_whatif(inputs.setup, inputs.jobs, p, s))
            progress.advance(task)
    summary = summarise_whatif(workload, inputs.fleet, results, names)
    if json_path is not None:
        output.write_json(json_path, summary)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        output.write_json(out / f"{workload}_summary.json", summary)
        for result in results:
            output.write_timeline_csv(out, workload, result.timeline)
            write_jobs_csv(out, workload, result)
        output.plot_timeline(out, workload, [r.timeline for r in results])
    _print_whatif(summary)


def _print_whatif(summary: dict[str, Any]) -> None:
    title = f"{summary['workload']} on {summary['fleet']} ({summary['jobs']} jobs, {summary['gpus']} GPUs)"
    caption = "unalloc: GPU % unallocated over the replay; queued: while jobs wait; end: last task ends"
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)  # 9 columns in 80
    table.add_column("policy", no_wrap=True)
    for column in ("placed", "waited", "never", "wait s", "p95 s", "unalloc", "queued", "end s"):
        table.add_column(column, justify="right")
    for name, r in summary["results"].items():
        waiting = r["unallocated_pct_while_waiting"]
        table.add_row(
            name,
            *(f"{r[k]:.4g}" for k in ("placed", "waited", "never_placed")),
            f"{r['wait_s']['mean']:.1f}",
            f"{r['wait_s']['p95']:.1f}",
            f"{r['unallocated_pct']:.2f}",
            "-" if waiting is None else f"{waiting:.2f}",
            f"{r['end_s']:.0f}",
        )
    Console().print(table)


def _run(jobs: list[Any], workers: int, title: str) -> list[Any]:
    from suanli.scheduling.simulator import batch

    with Progress(
        TextColumn(title),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("runs", total=len(jobs))
        return list(batch.run_jobs(jobs, workers, on_done=lambda: progress.advance(task)))


def _all_of(results: list[Any], kind: type[_R]) -> list[_R]:
    """``results`` as the one kind their mode produces."""
    wrong = [type(r).__name__ for r in results if not isinstance(r, kind)]
    if wrong:
        raise TypeError(f"expected only {kind.__name__} results, got {', '.join(sorted(set(wrong)))}")
    return list(results)


def _print_summary(summary: dict[str, Any], mode: str) -> None:
    table = Table(title=f"{summary['workload']} ({mode})")
    table.add_column("policy")
    if mode == "timeline":
        table.add_column("mean alloc %", justify="right")
        table.add_column("delay p50 s", justify="right")
        table.add_column("delay p95 s", justify="right")
        for name, r in summary["results"].items():
            d = r["queue_delay_s"]
            table.add_row(
                name, f"{r['mean_allocation_pct']['mean']:.2f}", f"{d['p50']:.0f}", f"{d['p95']:.0f}"
            )
    else:
        table.add_column("unallocated % @100", justify="right")
        table.add_column("allocation % @130", justify="right")
        for name, r in summary["results"].items():
            u, a = r["unallocated_pct_at_100"], r["allocation_pct_at_130"]
            table.add_row(name, f"{u['mean']:.2f} ± {u['sd']:.2f}", f"{a['mean']:.2f} ± {a['sd']:.2f}")
    Console().print(table)


app = typer.Typer(help="Trace-replay simulation of placement policies.", add_completion=False)
app.command("simulate")(simulate)
