"""The live terminal view of `suanli up`, and its one-line headless form.

Pure functions of what the observer collected (no I/O, no clock), like the CLI's renderers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.render import GPU_MILLI, amount, cores, gpus, requested_gpu_milli, state_name
from suanli.platform.inference_figures import InferenceStatus
from suanli.platform.observe import Decision, Observation
from suanli.platform.summary import (
    READY,
    GpuFigures,
    PreemptionSeen,
    StartedUse,
    gpu_figures,
    started_use,
)

ROWS = 6  # recent placements
LIST_ROWS = 5  # running and pending jobs
PREEMPTION_ROWS = 3
# Job names as the demo workload makes them (a template name and a sequence number) stay whole.
NAME_WIDTH = 22


@dataclass(frozen=True, slots=True)
class Status:
    """Where the run is, as the runner knows it."""

    phase: str  # "submitting", "draining", "settling"
    elapsed_s: float
    submitted: int
    planned: int
    counts: dict[int, int]  # job state -> jobs
    placements: int
    utilisation_avg: float
    milestones: dict[str, int] = field(default_factory=dict)  # the scenario's counts (observe.py)
    problems: tuple[str, ...] = ()
    logs: str = ""
    endpoints: str = ""  # where the CLI and the console reach the platform
    inference: InferenceStatus | None = None  # the demo's inference service, unless --no-inference


def _bar(ratio: float, width: int = 12) -> Text:
    filled = round(max(0.0, min(1.0, ratio)) * width)
    style = "green" if ratio < 0.7 else "yellow" if ratio < 0.9 else "red"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def _table(*columns: str, right: Iterable[str] = ()) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
    aligned = set(right)
    for column in columns:
        # Numbers keep their header's width; names give way (cut with an ellipsis) on narrow terminals.
        table.add_column(
            column,
            justify="right" if column in aligned else "left",
            no_wrap=True,
            min_width=len(column) if column in aligned else None,
            overflow="ellipsis",
        )
    return table


def capacity_panel(nodes: Sequence[pb.Node], started: StartedUse | None = None) -> Panel:
    """Allocated and utilisation count started tasks when ``started`` is given (placed ones do no work)."""
    groups: dict[tuple[str, str], list[pb.Node]] = {}
    for node in nodes:
        model = node.devices[0].model if node.devices else "cpu only"
        groups.setdefault((node.region, model), []).append(node)
    table = _table(
        "REGION",
        "GPU MODEL",
        "NODES",
        "GPUS",
        "ALLOCATED",
        "UTILISATION",
        "FRAGMENTED",
        "CPU FREE",
        right=("NODES", "GPUS", "ALLOCATED", "FRAGMENTED", "CPU FREE"),
    )
    for (region, model), members in sorted(groups.items()):
        ready = [n for n in members if n.status == READY]
        figures = gpu_figures(ready, started)
        free_cpu = sum(n.free_cpu_milli for n in ready)
        total_cpu = sum(n.cpu_milli for n in ready)
        table.add_row(
            region,
            model,
            f"{len(ready)}/{len(members)}",
            gpus(figures.total) if figures.total else "-",
            gpus(figures.allocated) if figures.total else "-",
            _bar(figures.utilisation) + Text(f" {100 * figures.utilisation:3.0f}%") if figures.total else "-",
            gpus(figures.fragmented) if figures.fragmented else "-",
            f"{cores(free_cpu)}/{cores(total_cpu)}",
        )
    overall = gpu_figures(nodes, started)
    return Panel(table, title="Capacity (scheduler's view)", subtitle=_overall(overall), title_align="left")


def _overall(figures: GpuFigures) -> str:
    return (
        f"GPUs {gpus(figures.allocated)}/{gpus(figures.total)} allocated "
        f"({100 * figures.utilisation:.0f}%), {gpus(figures.fragmented)} idle on partly used devices"
    )


def queues_panel(queues: Sequence[pb.Queue]) -> Panel:
    table = _table("QUEUE", "PEND", "RUN", "SHARE", "GPU USED/GUAR", right=("PEND", "RUN", "SHARE"))
    for queue in queues:
        gpu = [r for r in queue.resources if r.flavour.startswith("gpu:") and (r.used or r.guaranteed)]
        used = sum(r.used for r in gpu)
        guaranteed = sum(r.guaranteed for r in gpu)
        table.add_row(
            queue.name,
            str(queue.pending_jobs),
            str(queue.running_jobs),
            f"{queue.dominant_share:.2f}",
            f"{amount('gpu', used)}/{amount('gpu', guaranteed)}" if gpu else "-",
        )
    return Panel(table, title="Queues", title_align="left")


def pending_panel(jobs: Sequence[pb.Job]) -> Panel:
    pending = [j for j in jobs if j.state == pb.JOB_STATE_PENDING]
    reasons = Counter(j.pending_reason.code or "NEW" for j in pending)
    head = Text(
        ", ".join(f"{code} {count}" for code, count in reasons.most_common()) or "nothing pending",
        style="yellow" if pending else "dim",
    )
    table = _table("JOB", "QUEUE")
    table.columns[0].min_width = NAME_WIDTH  # which job matters more than the end of the reason
    table.add_column("WHY", no_wrap=True, overflow="ellipsis", ratio=1)
    for job in pending[:LIST_ROWS]:
        reason = job.pending_reason
        table.add_row(
            job.spec.name,
            job.spec.queue,
            reason.message or reason.code or "waiting for the next scheduling cycle",
        )
    return Panel(Group(head, table), title=f"Pending ({len(pending)})", title_align="left")


def running_panel(jobs: Sequence[pb.Job]) -> Panel:
    running = [j for j in jobs if j.state == pb.JOB_STATE_RUNNING]
    table = _table("JOB", "QUEUE", "TASKS", "GPU", "NODE", right=("TASKS", "GPU"))
    table.columns[0].min_width = NAME_WIDTH
    for job in running[-LIST_ROWS:]:
        nodes = sorted({t.node_id for t in job.tasks if t.node_id})
        started = sum(1 for t in job.tasks if t.state.lower() == "running")
        table.add_row(
            job.spec.name,
            job.spec.queue,
            f"{started}/{len(job.tasks)}",
            gpus(requested_gpu_milli(job.spec)),
            (nodes[0] + (f" +{len(nodes) - 1}" if len(nodes) > 1 else "")) if nodes else "-",
        )
    return Panel(table, title=f"Running ({len(running)})", title_align="left")


def cohort_rows(queues: Sequence[pb.Queue]) -> list[tuple[str, str, int, int, int, int]]:
    """(queue, flavour, guaranteed, used, borrowed, lent) for every GPU flavour of a queue in a cohort.

    The API gives what each queue borrows (its use beyond its guarantee); what the others of its cohort
    lend is that total shared among them in proportion to their idle lendable guarantee (exact for a
    cohort of two).
    """
    members = [q for q in queues if q.cohort]
    rows = []
    for queue in members:
        for r in queue.resources:
            if not r.flavour.startswith("gpu:") or not (r.guaranteed or r.used):
                continue
            peers = [
                x
                for q in members
                if q.cohort == queue.cohort and q.name != queue.name
                for x in q.resources
                if x.flavour == r.flavour
            ]
            borrowed_by_peers = sum(x.borrowed for x in peers)
            idle = _lendable_idle(r)
            idle_all = idle + sum(_lendable_idle(x) for x in peers if not x.borrowed)
            lent = min(idle, borrowed_by_peers * idle // idle_all) if idle_all and not r.borrowed else 0
            rows.append((queue.name, r.flavour, r.guaranteed, r.used, r.borrowed, lent))
    return rows


def _lendable_idle(r: pb.ResourceAmount) -> int:
    lendable = r.lending_limit if r.HasField("lending_limit") else r.guaranteed
    return max(0, min(lendable, r.guaranteed - r.used))


def cohorts_panel(queues: Sequence[pb.Queue]) -> Panel:
    """Borrowed and lent GPU quota inside each cohort (docs/queues.md, "Quota arithmetic")."""
    table = _table(
        "QUEUE", "GPU", "GUAR", "USED", "BORROWED", "LENT", right=("GUAR", "USED", "BORROWED", "LENT")
    )
    cohorts = sorted({q.cohort for q in queues if q.cohort})
    for name, flavour, guaranteed, used, borrowed, lent in cohort_rows(queues):
        table.add_row(
            name,
            flavour.removeprefix("gpu:"),
            amount(flavour, guaranteed),
            amount(flavour, used),
            Text(amount(flavour, borrowed), style="yellow") if borrowed else "-",
            Text(amount(flavour, lent), style="cyan") if lent else "-",
        )
    title = f"Cohorts: borrowed / lent ({', '.join(cohorts) or 'none'})"
    return Panel(table, title=title, title_align="left")


def preemptions_panel(preemptions: Sequence[PreemptionSeen]) -> Panel:
    """The latest preemptions: which job made room for which (priority classes in brackets)."""
    # Two lines each: the names whole on the first, the priority classes and queue below.
    lines: list[RenderableType] = []
    for p in list(preemptions)[-PREEMPTION_ROWS:]:
        lines.append(Text(p.preemptor, style="bold") + Text(" preempted ") + Text(p.victim, style="bold"))
        lines.append(
            Text(f"  priority {p.preemptor_priority} over {p.victim_priority} in {p.queue}", style="dim")
        )
    body: RenderableType = Group(*lines) if preemptions else Text("no preemption yet", style="dim")
    return Panel(body, title=f"Preemptions ({len(preemptions)})", title_align="left")


def decisions_panel(decisions: Iterable[Decision], currency: str = "") -> Panel:
    """Where each placement went and why: its region (short, as the network matrix heads it), the RTT
    from there to the job's data region (the constraint it met) and the price per hour it was expected to
    cost."""
    price = f"{currency}/H" if currency else "PRICE/H"
    table = _table("TASK", "NODE", "REG", "RTT", price, right=("RTT", price))
    # Half of 120 columns: the task's name gives way first, then the node's; the figures never do.
    table.columns[0].max_width = 23
    table.columns[1].max_width = 13
    table.columns[2].min_width = 3
    for d in list(decisions)[:ROWS]:
        table.add_row(
            f"{d.job_name}/{_task(d)}",
            d.node_id,
            short_region(d.region) if d.region else "-",
            _rtt(d),
            f"{d.price_per_hour:.2f}" if d.price_per_hour is not None else "-",
        )
    return Panel(
        table,
        title="Recent placements",
        subtitle="RTT: ms to the job's data region (- none)",
        subtitle_align="right",
        title_align="left",
    )


def _rtt(decision: Decision) -> Text:
    if not decision.data_region:
        return Text("-", style="dim")
    if decision.rtt_ms is None:
        return Text("?", style="yellow")
    return Text(f"{decision.rtt_ms:.0f}")


_LINK_STYLES = {
    rpb.LINK_STATUS_OK: "green",
    rpb.LINK_STATUS_DEGRADED: "yellow",
    rpb.LINK_STATUS_DOWN: "bold red",
    rpb.LINK_STATUS_UNKNOWN: "dim",
}


def short_region(region: str) -> str:
    """A region's column heading: `frankfurt` -> `fra`, `washington-dc` -> `wdc`, `sao-paulo` -> `spa`."""
    *head, last = region.split("-")
    return ("".join(p[:1] for p in head) + last[: 3 - len(head)]) if head else region[:3]


def network_panel(links: Sequence[rpb.Link] | None) -> Panel:
    """Routing's region matrix: rows from, columns to (headed by short names in the rows' order); each
    cell the EWMA RTT in ms, coloured by the pair's status (yellow DEGRADED), `×` for a DOWN pair."""
    title = "Network (routing's view, RTT ms)"
    if links is None:
        return Panel(Text("routing is not answering", style="yellow"), title=title, title_align="left")
    regions = sorted({x.src_region for x in links} | {x.dst_region for x in links})
    if not regions:
        return Panel(Text("no probe round yet", style="dim"), title=title, title_align="left")
    by_pair = {(x.src_region, x.dst_region): x for x in links}
    # Cells 3 wide plus one space: ten regions (the world fleet) fit half of 120 columns.
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 0, 0, 1))
    table.add_column("FROM \\ TO", no_wrap=True, overflow="ellipsis", min_width=13, max_width=13)
    for region in regions:
        table.add_column(short_region(region), justify="right", no_wrap=True, min_width=3)
    for src in regions:
        cells = []
        for dst in regions:
            link = by_pair.get((src, dst))
            if src == dst and link is None:
                cells.append(Text("·", style="dim"))
            elif link is None:
                cells.append(Text("-", style="dim"))
            elif link.status == rpb.LINK_STATUS_DOWN:
                cells.append(Text("×", style=_LINK_STYLES[link.status]))
            else:
                cells.append(Text(f"{link.rtt_ms:.0f}", style=_LINK_STYLES.get(link.status, "")))
        table.add_row(src, *cells)
    return Panel(table, title=title, subtitle=_link_counts(links), subtitle_align="right", title_align="left")


def _link_counts(links: Sequence[rpb.Link]) -> str:
    statuses = Counter(x.status for x in links)
    return ", ".join(
        f"{statuses[s]} {rpb.LinkStatus.Name(s).removeprefix('LINK_STATUS_').lower()}"
        for s in (rpb.LINK_STATUS_OK, rpb.LINK_STATUS_DEGRADED, rpb.LINK_STATUS_DOWN)
    )


def _task(decision: Decision) -> str:
    return decision.task_id.removeprefix(f"{decision.job_id}-")


def charges_panel(observation: Observation) -> Panel:
    table = _table("TENANT", "CHARGES", "LINES", right=("CHARGES", "LINES"))
    currency = ""
    for tenant, charge in observation.charges.items():
        currency = currency or charge.currency
        table.add_row(tenant, f"{charge.total:.6f}", str(charge.charges))
    return Panel(table, title=f"Charges so far ({currency or '-'})", title_align="left")


def _latency(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{1000 * seconds:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def inference_figures(i: InferenceStatus) -> tuple[str, str]:
    """The service's replicas and scaling; the replay's rate, attainment and latency."""
    running = i.states.get("running", 0)
    placed = running + i.states.get("placed", 0)
    replicas = (
        f"replicas {running} running/{placed} placed/{i.desired} desired  scale events {i.scale_events}"
    )
    replicas += f" (last {i.last_scale})" if i.last_scale else ""
    d = i.drive
    if d is None:
        return replicas, "no request sent yet"
    slo = "-" if d.slo_attainment is None else f"{100 * d.slo_attainment:.0f}%"
    requests = (
        f"requests {d.requests} ({d.recent_per_s:.1f}/s now)  SLO {slo}  latency p50 "
        f"{_latency(d.latency_p50_s)} p99 {_latency(d.latency_p99_s)}  failed {sum(d.failures.values())}"
    )
    return replicas, requests


def inference_panel(i: InferenceStatus) -> Panel:
    """Replicas, request rate, latency and scaling of the demo's service; failures by reason."""
    rows = [Text(line) for line in inference_figures(i)]
    if i.drive is not None and i.drive.failures:
        failed = ", ".join(f"{reason} {n}" for reason, n in list(i.drive.failures.items())[:3])
        rows.append(Text(f"failed: {failed}", style="yellow"))
    if i.problem:
        rows.append(Text(i.problem, style="red"))
    return Panel(
        Group(*rows), title=f"Inference: {i.service} ({i.model}) via the gateway", title_align="left"
    )


def status_line(status: Status) -> Text:
    counts = status.counts
    line = Text(f"{status.elapsed_s:5.0f}s  {status.phase:<10}", style="bold")
    line.append(f"  submitted {status.submitted}/{status.planned}")
    for state in (
        pb.JOB_STATE_PENDING,
        pb.JOB_STATE_RUNNING,
        pb.JOB_STATE_SUCCEEDED,
        pb.JOB_STATE_FAILED,
        pb.JOB_STATE_CANCELLED,
    ):
        line.append(f"  {state_name(state).lower()} {counts.get(state, 0)}")
    line.append(f"  placements {status.placements}  GPU util avg {100 * status.utilisation_avg:.0f}%")
    for problem in status.problems:
        line.append(f"  ! {problem}", style="red")
    return line


def milestones_line(status: Status) -> str:
    """The scenario's counts so far (docs/demo.md, "The scenario")."""
    return "  ".join(f"{name} {n}" for name, n in status.milestones.items())


def progress_line(status: Status, observation: Observation) -> str:
    """The headless form: one plain line per report."""
    charges = " ".join(f"{t}={c.total:.4f}" for t, c in observation.charges.items())
    figures = gpu_figures(observation.nodes, started_use(observation.jobs))
    return (
        f"{status_line(status).plain}  GPU now {100 * figures.utilisation:.0f}%"
        + (f"  region links {_link_counts(observation.network)}" if observation.network else "")
        + (f"  charges {charges}" if charges else "")
        + (f"  {milestones_line(status)}" if status.milestones else "")
        + (f"  inference {'  '.join(inference_figures(status.inference))}" if status.inference else "")
    )


def dashboard(
    status: Status,
    observation: Observation,
    jobs: Sequence[pb.Job],
    decisions: Iterable[Decision],
    preemptions: Sequence[PreemptionSeen] = (),
) -> RenderableType:
    """Two columns of half of 120 each; the pending jobs and their reasons take the whole width."""
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    currency = next((c.currency for c in observation.charges.values() if c.currency), "")
    grid.add_row(
        Group(
            running_panel(jobs),
            preemptions_panel(preemptions),
            network_panel(observation.network),
            charges_panel(observation),
        ),
        Group(
            decisions_panel(decisions, currency),
            cohorts_panel(observation.queues),
            queues_panel(observation.queues),
        ),
    )
    reach = f"{status.endpoints} (context 'up'). " if status.endpoints else ""
    footer = Text(f"{reach}Ctrl-C stops everything. Logs: {status.logs}", style="dim")
    title = Text("suanli up", style="bold cyan") + Text(f"  1 GPU = {GPU_MILLI} milli", style="dim")
    return Group(
        title,
        status_line(status),
        Text(milestones_line(status), style="cyan"),
        capacity_panel(observation.nodes, started_use(observation.jobs)),
        *([inference_panel(status.inference)] if status.inference is not None else []),
        pending_panel(jobs),
        grid,
        footer,
    )
