"""How a `suanli up` run went: GPU capacity figures per poll, their time averages, and the final summary
(printed for people, written as `<home>/summary.json` for scripts and the end-to-end test).

Pure: figures are computed from the messages and times they are given.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.render import GPU_MILLI, amount, gpus, state_name
from suanli.platform.inference_figures import InferenceSummary
from suanli.platform.observe import Borrowing, IssuedInvoice, Preemption, TenantCharges, Wait

READY = "READY"
NETWORK_ROWS = 12  # network-aware jobs listed in the printed summary (summary.json keeps them all)
EVIDENCE_ROWS = 3  # examples per milestone in the printed summary (summary.json keeps them all)
ALLOCATION_TARGET = 0.6  # the demo's point: most of the fleet busy (docs/demo.md, "The scenario")


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """GPU capacity of schedulable nodes at one moment, in milli-GPU."""

    total: int = 0
    allocated: int = 0
    # Idle milli on devices that are partly allocated: room only a small fractional task can use.
    fragmented: int = 0

    @property
    def utilisation(self) -> float:
        return self.allocated / self.total if self.total else 0.0

    @property
    def fragmentation(self) -> float:
        return self.fragmented / self.total if self.total else 0.0


# node id -> device index -> milli-GPU held by tasks that have started there.
StartedUse = Mapping[str, Mapping[int, int]]


def started_use(jobs: Iterable[pb.Job]) -> dict[str, dict[int, int]]:
    """GPU use of started (running) tasks only: a task placed but never started does no work, so it
    must not count as utilisation, whatever room the scheduler holds for it."""
    use: dict[str, dict[int, int]] = {}
    for job in jobs:
        for task in job.tasks:
            if task.state != "RUNNING" or not task.node_id:
                continue
            devices = use.setdefault(task.node_id, {})
            for index, milli in zip(task.gpu_indices, task.gpu_milli, strict=False):
                devices[index] = devices.get(index, 0) + (milli or GPU_MILLI)
    return use


def gpu_figures(nodes: Iterable[pb.Node], started: StartedUse | None = None) -> GpuFigures:
    """Totals of Ready nodes; allocated is what started tasks use when ``started`` is given, else what
    the scheduler's view holds (placed tasks included)."""
    total = allocated = fragmented = 0
    for node in nodes:
        if node.status != READY:
            continue
        on_node = started.get(node.id, {}) if started is not None else None
        for device in node.devices:
            held = GPU_MILLI - device.free_milli if on_node is None else on_node.get(device.index, 0)
            free = min(max(GPU_MILLI - held, 0), GPU_MILLI)
            total += GPU_MILLI
            allocated += GPU_MILLI - free
            if 0 < free < GPU_MILLI:
                fragmented += free
    return GpuFigures(total, allocated, fragmented)


@dataclass
class TimeAverage:
    """Time-weighted averages of GPU figures: each sample holds until the next one."""

    _last: tuple[float, GpuFigures] | None = None
    _span_s: float = 0.0
    _utilisation_s: float = 0.0
    _fragmentation_s: float = 0.0
    peak_utilisation: float = 0.0

    def add(self, at: float, figures: GpuFigures) -> None:
        if self._last is not None:
            since, previous = self._last
            span = max(0.0, at - since)
            self._span_s += span
            self._utilisation_s += span * previous.utilisation
            self._fragmentation_s += span * previous.fragmentation
        self._last = (at, figures)
        self.peak_utilisation = max(self.peak_utilisation, figures.utilisation)

    @property
    def utilisation(self) -> float:
        return self._utilisation_s / self._span_s if self._span_s else 0.0

    @property
    def fragmentation(self) -> float:
        return self._fragmentation_s / self._span_s if self._span_s else 0.0


@dataclass(frozen=True, slots=True)
class NetworkPlacement:
    """Where a job that named its data region went: the regions its tasks ran in (one for a gang kept
    together) and the largest RTT from them to the data region, as the scheduler recorded it."""

    job: str
    state: str
    data_region: str
    max_rtt_ms: float | None
    regions: list[str]
    rtt_ms: float | None  # None: not placed, or nothing measured


def network_placements(jobs: Iterable[pb.Job]) -> list[NetworkPlacement]:
    out = []
    for job in jobs:
        if not job.spec.data_region:
            continue
        placed = [t for t in job.tasks if t.region]
        rtts = [t.rtt_ms for t in placed if t.HasField("rtt_ms")]
        out.append(
            NetworkPlacement(
                job=job.spec.name,
                state=state_name(job.state).lower(),
                data_region=job.spec.data_region,
                max_rtt_ms=job.spec.max_rtt_ms if job.spec.HasField("max_rtt_ms") else None,
                regions=sorted({t.region for t in placed}),
                rtt_ms=max(rtts) if rtts else None,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class WaitedJob:
    job: str
    queue: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class PreemptionSeen:
    victim: str  # job names; the id when the job is not one of the run's
    victim_priority: str
    preemptor: str
    preemptor_priority: str
    queue: str  # the victim's


@dataclass(frozen=True, slots=True)
class InvoiceSeen:
    tenant: str
    period: str
    invoice_id: str
    total: str
    currency: str
    lines: int


@dataclass
class Milestones:
    """What the scenario set out to show, each with its evidence (docs/demo.md, "Reading the summary")."""

    allocation_peak: float = 0.0
    allocation_mean: float = 0.0
    waited: list[WaitedJob] = field(default_factory=list)
    borrowed: list[Borrowing] = field(default_factory=list)
    preemptions: list[PreemptionSeen] = field(default_factory=list)
    # Held by QUOTA_EXCEEDED and never run (the scheduler's reason); jobs that waited on quota and then
    # ran are in `waited`.
    refused: list[WaitedJob] = field(default_factory=list)
    invoices: list[InvoiceSeen] = field(default_factory=list)

    @property
    def reached(self) -> dict[str, bool]:
        return {
            "allocation": self.allocation_peak > ALLOCATION_TARGET,
            "wait": bool(self.waited),
            "borrow": bool(self.borrowed),
            "preemption": bool(self.preemptions),
            "quota_refusal": bool(self.refused),
            "invoice": bool(self.invoices),
        }


def preemptions_seen(jobs: Mapping[str, pb.Job], preemptions: Iterable[Preemption]) -> list[PreemptionSeen]:
    """The preemptions by job name and priority class, oldest first."""

    def spec(job_id: str) -> pb.JobSpec | None:
        job = jobs.get(job_id)
        return job.spec if job is not None else None

    seen = []
    for p in sorted(preemptions, key=lambda p: p.at):
        victim, preemptor = spec(p.victim_id), spec(p.preemptor_id)
        seen.append(
            PreemptionSeen(
                victim.name if victim else p.victim_id,
                (victim.priority_class or "-") if victim else "-",
                preemptor.name if preemptor else p.preemptor_id,
                (preemptor.priority_class or "-") if preemptor else "-",
                victim.queue if victim else "",
            )
        )
    return seen


def milestones(
    jobs: Mapping[str, pb.Job],
    waits: Iterable[Wait],
    refusals: Iterable[Wait],
    preemptions: Iterable[Preemption],
    borrowing: Iterable[Borrowing],
    invoices: Iterable[IssuedInvoice],
    averages: TimeAverage,
) -> Milestones:
    return Milestones(
        allocation_peak=round(averages.peak_utilisation, 4),
        allocation_mean=round(averages.utilisation, 4),
        waited=[WaitedJob(w.job_name, w.queue, w.code, w.message) for w in waits],
        borrowed=sorted(borrowing, key=lambda b: (-b.borrowed, b.queue, b.flavour)),
        preemptions=preemptions_seen(jobs, preemptions),
        refused=[WaitedJob(w.job_name, w.queue, w.code, w.message) for w in refusals],
        invoices=[
            InvoiceSeen(i.tenant, i.period, i.invoice_id, str(i.total), i.currency, i.lines)
            for i in sorted(invoices, key=lambda i: (i.period, i.tenant))
        ],
    )


@dataclass
class Summary:
    submitted: int
    succeeded: int
    failed: int
    cancelled: int
    unfinished: int
    rejected: int  # submits the scheduler refused
    all_final: bool
    gpu_utilisation_avg: float  # time-averaged allocated / total GPU milli while the workload ran
    gpu_utilisation_peak: float
    fragmentation_avg: float  # time-averaged idle milli on partly used devices / total GPU milli
    gpus_total: float
    placements: int
    charges: dict[str, str]  # tenant -> total, decimal text
    charge_counts: dict[str, int]
    currency: str
    healthy: bool
    problems: list[str]
    leftover_processes: list[int]
    wall_s: float
    submit_s: float
    drain_s: float
    exit_code: int = 0
    home: str = ""
    fleet: str = ""
    workload: str = ""
    policy: str = ""
    unfinished_jobs: list[str] = field(default_factory=list)
    network_placements: list[NetworkPlacement] = field(default_factory=list)
    milestones: Milestones = field(default_factory=Milestones)
    inference: InferenceSummary | None = None  # None: run with --no-inference

    def to_json(self) -> str:
        data = asdict(self)
        data["milestones"]["reached"] = self.milestones.reached
        return json.dumps(data, indent=2, sort_keys=False)

    def write(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n", encoding="utf-8")


def job_outcomes(jobs: Iterable[pb.Job]) -> dict[str, int]:
    counts = {"succeeded": 0, "failed": 0, "cancelled": 0, "unfinished": 0}
    for job in jobs:
        name = state_name(job.state).lower()
        counts[name if name in counts else "unfinished"] += 1
    return counts


def charge_totals(charges: Mapping[str, TenantCharges]) -> tuple[dict[str, str], dict[str, int], str]:
    currency = next((c.currency for c in charges.values() if c.currency), "")
    return (
        {tenant: str(c.total) for tenant, c in charges.items()},
        {tenant: c.charges for tenant, c in charges.items()},
        currency,
    )


def _percent(ratio: float) -> str:
    return f"{100 * ratio:.1f}%"


def render_summary(summary: Summary) -> RenderableType:
    verdict = (
        Text("OK: every submitted job reached a final state; the platform stayed healthy", style="green")
        if summary.exit_code == 0
        else Text(f"FAILED (exit {summary.exit_code}): " + "; ".join(summary.problems), style="red")
    )
    jobs = Table.grid(padding=(0, 2))
    jobs.add_column(style="bold")
    jobs.add_column()
    rows: Sequence[tuple[str, str]] = [
        (
            "Jobs",
            f"{summary.submitted} submitted, {summary.succeeded} succeeded, {summary.failed} failed, "
            f"{summary.cancelled} cancelled, {summary.unfinished} unfinished"
            + (f", {summary.rejected} refused" if summary.rejected else ""),
        ),
        ("Placements", str(summary.placements)),
        (
            "GPU utilisation",
            f"{_percent(summary.gpu_utilisation_avg)} time-averaged allocated/total "
            f"of {gpus(int(summary.gpus_total * GPU_MILLI))} GPUs "
            f"(peak {_percent(summary.gpu_utilisation_peak)})",
        ),
        (
            "Fragmentation",
            f"{_percent(summary.fragmentation_avg)} of GPU capacity idle on partly used "
            "devices (time-averaged)",
        ),
        (
            "Time",
            f"{summary.wall_s:.0f}s in all: {summary.submit_s:.0f}s submitting, "
            f"{summary.drain_s:.0f}s draining",
        ),
    ]
    for name, value in rows:
        jobs.add_row(name, value)
    charges = Table(box=None, pad_edge=False, header_style="bold")
    charges.add_column("TENANT")
    charges.add_column(f"CHARGES ({summary.currency or '-'})", justify="right")
    charges.add_column("LINES", justify="right")
    for tenant, total in summary.charges.items():
        charges.add_row(tenant, total, str(summary.charge_counts.get(tenant, 0)))
    return Group(
        Text("Summary", style="bold underline"),
        jobs,
        Text(""),
        charges,
        Text(""),
        *milestones_section(summary.milestones),
        *_network_section(summary.network_placements),
        *inference_section(summary.inference),
        verdict,
    )


def _network_section(placements: Sequence[NetworkPlacement]) -> list[RenderableType]:
    if not placements:
        return []
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("JOB", "STATE", "DATA REGION", "MAX RTT", "RAN IN", "RTT"):
        table.add_column(column, justify="right" if "RTT" in column else "left", no_wrap=True)
    for p in placements[:NETWORK_ROWS]:
        table.add_row(
            p.job,
            p.state,
            p.data_region,
            f"{p.max_rtt_ms:g} ms" if p.max_rtt_ms is not None else "-",
            ", ".join(p.regions) or "-",
            f"{p.rtt_ms:.0f} ms" if p.rtt_ms is not None else "-",
        )
    more = len(placements) - NETWORK_ROWS
    title = Text(f"Network-aware placements ({len(placements)} jobs named a data region)", style="bold")
    tail = [Text(f"… and {more} more in summary.json", style="dim")] if more > 0 else []
    return [title, table, *tail, Text("")]


def _mark(reached: bool) -> Text:
    return Text("✓", style="green") if reached else Text("✗", style="red")


def _more(items: Sequence[object]) -> str:
    more = len(items) - EVIDENCE_ROWS
    return f"; … {more} more in summary.json" if more > 0 else ""


def milestones_section(m: Milestones) -> list[RenderableType]:
    """One line per milestone: reached or not, and the evidence (a few examples; summary.json has all)."""
    reached = m.reached
    waits = Counter(w.code for w in m.waited)
    rows: list[tuple[str, str]] = [
        (
            "allocation",
            f"peak {_percent(m.allocation_peak)}, mean {_percent(m.allocation_mean)} of the fleet's GPUs "
            f"(target: peak above {_percent(ALLOCATION_TARGET)})",
        ),
        (
            "wait",
            f"{len(m.waited)} job(s) waited: "
            + (", ".join(f"{code} {n}" for code, n in waits.most_common()) or "none"),
        ),
        (
            "borrow",
            "; ".join(
                f"{b.queue} borrowed {amount(b.flavour, b.borrowed)} {b.flavour.removeprefix('gpu:')} "
                f"beyond its {amount(b.flavour, b.guaranteed)} (cohort {b.cohort or '-'})"
                for b in m.borrowed[:EVIDENCE_ROWS]
            )
            + _more(m.borrowed)
            or "no queue borrowed",
        ),
        (
            "preemption",
            "; ".join(
                f"{p.preemptor} ({p.preemptor_priority}) preempted {p.victim} ({p.victim_priority})"
                for p in m.preemptions[:EVIDENCE_ROWS]
            )
            + _more(m.preemptions)
            or "none",
        ),
        (
            "quota_refusal",
            "; ".join(f"{r.job}: {r.code}: {r.message}" for r in m.refused[:EVIDENCE_ROWS]) + _more(m.refused)
            or "none",
        ),
        (
            "invoice",
            "; ".join(
                f"{i.tenant} {i.period} {i.total} {i.currency} ({i.lines} lines)"
                for i in m.invoices[:EVIDENCE_ROWS]
            )
            + _more(m.invoices)
            or "no period closed yet",
        ),
    ]
    table = Table.grid(padding=(0, 1))
    table.add_column()
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, evidence in rows:
        table.add_row(_mark(reached[key]), key, evidence)
    return [Text("Milestones", style="bold"), table, Text("")]


def _optional_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def inference_section(inference: InferenceSummary | None) -> list[RenderableType]:
    """The inference service's lines: the replay through the gateway, SLO attainment, GPU-seconds."""
    if inference is None:
        return []
    i = inference
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    failures = ", ".join(f"{reason} {n}" for reason, n in i.failures.items()) or "none"
    scale = "; ".join(
        f"{e.replicas_from}→{e.replicas_to} at {e.at_s:.0f}s" for e in i.scale_events[:EVIDENCE_ROWS]
    )
    rows = [
        ("Requests", f"{i.requests} through {i.gateway} ({i.requests_per_s:.1f}/s), {i.answered} answered"),
        (
            "SLO attainment",
            "-"
            if i.slo_attainment is None
            else f"{_percent(i.slo_attainment)} ({i.slo_met} within TTFT + TPOT x generated tokens)",
        ),
        ("Latency", f"p50 {_optional_s(i.latency_p50_s)}, p99 {_optional_s(i.latency_p99_s)} (answered)"),
        (
            "Added",
            f"p50 {_optional_s(i.added_p50_s)}, p99 {_optional_s(i.added_p99_s)} "
            "(latency seen minus the replica model's: gateway, HTTP, the replica server's loop)",
        ),
        ("Failed", failures),
        (
            "GPU-seconds",
            f"{i.gpu_seconds:.1f} by {i.replica_jobs} replica job(s), at most {i.peak_running} running"
            if i.gpu_seconds is not None
            else "- (the scheduler did not answer)",
        ),
        ("Scale events", f"{len(i.scale_events)}" + (f": {scale}{_more(i.scale_events)}" if scale else "")),
    ]
    if i.problem:
        rows.append(("Problem", i.problem))
    for name, value in rows:
        table.add_row(name, value)
    title = Text(f"Inference: {i.service} ({i.model}), the Azure trace at {i.speed:g}x", style="bold")
    return [title, table, Text("")]
