"""The console's pages as HTML: pure functions from the services' messages to fragments (no I/O, no clock).

Every value that comes from a service (names, labels, messages, reasons) goes through `esc`, so a queue
called ``<script>`` is shown, never run. A page is a title and its live fragments, each rendered into a
``<section id=...>``; the event stream (suanli.console.server) sends the same fragments again when they
change, and static/console.js swaps them in.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from google.protobuf.message import Message

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.cli.render import (
    FINAL_STATES,
    GPU_MILLI,
    accounting_fields,
    amount,
    cores,
    duration,
    gpu_slots,
    gpus,
    state_name,
    timestamp,
)

# (path, label) of the navigation bar, in order; the path names the page in the event stream too.
NAV: tuple[tuple[str, str], ...] = (
    ("/", "Overview"),
    ("/nodes", "Nodes"),
    ("/queues", "Queues"),
    ("/jobs", "Jobs"),
    ("/services", "Services"),
    ("/network", "Network"),
    ("/charges", "Charges"),
)

_LINK_STATUS = {
    rpb.LINK_STATUS_OK: "ok",
    rpb.LINK_STATUS_DEGRADED: "degraded",
    rpb.LINK_STATUS_DOWN: "down",
    rpb.LINK_STATUS_UNKNOWN: "unknown",
}


def esc(value: object) -> str:
    """Text as HTML, quotes included (values land in attributes too)."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Page:
    """A page: its title and its live fragments (element id -> inner HTML), in display order."""

    title: str
    fragments: dict[str, str] = field(default_factory=dict)


def unavailable(what: str, detail: str) -> str:
    """A fragment in place of an answer that did not come (a service away, a refusal)."""
    return f'<p class="error">{esc(what)}: {esc(detail)}</p>'


def _empty(text: str) -> str:
    return f'<p class="empty">{esc(text)}</p>'


def heat_style(ratio: float) -> str:
    """The cell style of a utilisation in [0, 1]: pale at 0, deep red at 1, white text on dark cells."""
    ratio = min(max(ratio, 0.0), 1.0)
    lightness = round(96 - 56 * ratio)
    colour = "#fff" if ratio > 0.6 else "#111"
    return f"background:hsl(8,78%,{lightness}%);color:{colour}"


def _percent(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def _css(name: str) -> str:
    return f' class="{name}"' if name else ""


def _table(headings: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headings)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _row_group(
    attributes: str,
    spanned: Sequence[tuple[str, str]],
    parts: Sequence[str],
    after: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The rows of one item with several parts (a queue's flavours, a service's replicas): its own
    cells, (html, CSS class) pairs, span the rows before and after the cells of each part."""
    span = f' rowspan="{len(parts)}"'

    def cells(given: Sequence[tuple[str, str]]) -> str:
        return "".join(f"<td{span}{_css(css)}>{html}</td>" for html, css in given)

    first = f"<tr {attributes}>{cells(spanned)}{parts[0]}{cells(after)}</tr>"
    return [first, *(f"<tr>{part}</tr>" for part in parts[1:])]


# --- overview ------------------------------------------------------------------------------------


def capacity_cells(nodes: Iterable[pb.Node]) -> dict[tuple[str, str], tuple[int, int]]:
    """(region, GPU model) -> (allocated milli-GPU, total milli-GPU) over every device of ``nodes``."""
    cells: dict[tuple[str, str], tuple[int, int]] = {}
    for node in nodes:
        for device in node.devices:
            key = (node.region, device.model or "?")
            used, total = cells.get(key, (0, 0))
            cells[key] = (used + GPU_MILLI - device.free_milli, total + GPU_MILLI)
    return cells


def _heat_cell(used: int, total: int, tag: str = "td") -> str:
    if not total:
        return f'<{tag} class="num none">-</{tag}>'
    ratio = used / total
    title = f"{gpus(used)} of {gpus(total)} GPUs allocated"
    return (
        f'<{tag} class="num heat" style="{heat_style(ratio)}" title="{esc(title)}">'
        f"{gpus(used)}/{gpus(total)}<br><small>{_percent(used, total)}</small></{tag}>"
    )


def heatmap(nodes: Sequence[pb.Node]) -> str:
    """Capacity by region (rows) and GPU model (columns): allocated/total GPUs, coloured by utilisation,
    with the totals of each row and column."""
    cells = capacity_cells(nodes)
    if not cells:
        return _empty("No GPU capacity reported yet.")
    regions = sorted({r for r, _ in cells})
    models = sorted({m for _, m in cells})
    head = "".join(f'<th scope="col">{esc(m)}</th>' for m in models)
    rows = []
    for region in regions:
        row = [cells.get((region, m), (0, 0)) for m in models]
        used, total = sum(u for u, _ in row), sum(t for _, t in row)
        body = "".join(_heat_cell(u, t) for u, t in row)
        rows.append(f'<tr><th scope="row">{esc(region)}</th>{body}{_heat_cell(used, total, "th")}</tr>')
    columns = [
        (
            sum(cells.get((r, m), (0, 0))[0] for r in regions),
            sum(cells.get((r, m), (0, 0))[1] for r in regions),
        )
        for m in models
    ]
    used, total = sum(u for u, _ in columns), sum(t for _, t in columns)
    foot = "".join(_heat_cell(u, t, "th") for u, t in columns) + _heat_cell(used, total, "th")
    return (
        '<table class="heatmap"><thead><tr><th>region \\ GPU model</th>'
        f"{head}<th>total</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        f'<tfoot><tr><th scope="row">total</th>{foot}</tr></tfoot></table>'
    )


def fleet_summary(nodes: Sequence[pb.Node]) -> str:
    """Nodes, CPU and memory in use, and GPUs allocated over the whole fleet."""
    cpu = sum(n.cpu_milli for n in nodes)
    free_cpu = sum(n.free_cpu_milli for n in nodes)
    mem = sum(n.memory_mib for n in nodes)
    free_mem = sum(n.free_memory_mib for n in nodes)
    used_gpu = sum(GPU_MILLI - d.free_milli for n in nodes for d in n.devices)
    total_gpu = GPU_MILLI * sum(len(n.devices) for n in nodes)
    items = [
        ("nodes", str(len(nodes))),
        ("GPUs allocated", f"{gpus(used_gpu)} / {gpus(total_gpu)} ({_percent(used_gpu, total_gpu)})"),
        ("CPU in use", f"{cores(cpu - free_cpu)} / {cores(cpu)} cores"),
        ("memory in use", f"{_percent(mem - free_mem, mem)}"),
    ]
    return _stats(items, "fleet")


def _stats(items: Sequence[tuple[str, str]], name: str) -> str:
    body = "".join(
        f'<div class="stat" data-stat="{esc(label)}"><span class="label">{esc(label)}</span>'
        f'<span class="value">{esc(value)}</span></div>'
        for label, value in items
    )
    return f'<div class="stats" data-stats="{esc(name)}">{body}</div>'


def job_counts(jobs: Sequence[pb.Job]) -> str:
    """Jobs by state (of the jobs listed)."""
    counts = {state: 0 for state in (pb.JOB_STATE_PENDING, pb.JOB_STATE_RUNNING, *sorted(FINAL_STATES))}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    return _stats([(state_name(s).lower(), str(n)) for s, n in counts.items()], "jobs")


# --- nodes ---------------------------------------------------------------------------------------


def _device(device: pb.Device) -> str:
    used = GPU_MILLI - device.free_milli
    title = f"GPU {device.index} {device.model}: {gpus(used)} allocated"
    return (
        f'<span class="device" style="{heat_style(used / GPU_MILLI)}" title="{esc(title)}">'
        f"{device.index}<small>{_percent(used, GPU_MILLI)}</small></span>"
    )


def nodes_table(nodes: Sequence[pb.Node]) -> str:
    """Each node with its free/total CPU and memory and every GPU with its allocation."""
    if not nodes:
        return _empty("No nodes reported yet.")
    rows = []
    for n in sorted(nodes, key=lambda n: (n.region, n.id)):
        models = sorted({d.model for d in n.devices})
        labels = ", ".join(f"{k}={v}" for k, v in sorted(n.labels.items()))
        rows.append(
            f"<tr><td>{esc(n.id)}</td><td>{esc(n.region)}</td><td>{esc(n.zone)}</td>"
            f"<td>{esc(n.status)}</td>"
            f'<td class="num">{cores(n.cpu_milli - n.free_cpu_milli)} / {cores(n.cpu_milli)}</td>'
            f'<td class="num">{_percent(n.memory_mib - n.free_memory_mib, n.memory_mib)}</td>'
            f"<td>{esc(', '.join(models) or '-')}</td>"
            f'<td class="devices">{"".join(_device(d) for d in n.devices) or "-"}</td>'
            f"<td>{esc(labels or '-')}</td></tr>"
        )
    return (
        "<table><thead><tr><th>node</th><th>region</th><th>zone</th><th>status</th><th>CPU used</th>"
        "<th>memory used</th><th>GPU model</th><th>GPUs (allocation)</th><th>labels</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# --- queues --------------------------------------------------------------------------------------


def pending_reasons(jobs: Iterable[pb.Job]) -> dict[str, dict[str, int]]:
    """queue -> pending reason code -> how many of its pending jobs wait for it."""
    found: dict[str, dict[str, int]] = {}
    for job in jobs:
        if job.state != pb.JOB_STATE_PENDING:
            continue
        code = job.pending_reason.code or "(no reason yet)"
        by_code = found.setdefault(job.spec.queue, {})
        by_code[code] = by_code.get(code, 0) + 1
    return found


def _limit(resource: pb.ResourceAmount, name: str) -> str:
    return amount(resource.flavour, getattr(resource, name)) if resource.HasField(name) else "-"


def _resource_rows(queue: pb.Queue) -> list[str]:
    rows = []
    for r in queue.resources:
        ratio = r.used / r.guaranteed if r.guaranteed else (1.0 if r.used else 0.0)
        rows.append(
            f"<td>{esc(r.flavour)}</td><td class=num>{amount(r.flavour, r.guaranteed)}</td>"
            f"<td class=num>{_limit(r, 'maximum')}</td>"
            f'<td class="num heat" style="{heat_style(ratio)}">{amount(r.flavour, r.used)}'
            f" <small>{_percent(r.used, r.guaranteed)}</small></td>"
            f"<td class=num>{amount(r.flavour, r.borrowed)}</td>"
            f"<td class=num>{_limit(r, 'borrowing_limit')}</td>"
            f"<td class=num>{_limit(r, 'lending_limit')}</td>"
        )
    return rows or ['<td colspan="7">-</td>']


def queues_table(queues: Sequence[pb.Queue], pending: Mapping[str, Mapping[str, int]]) -> str:
    """Each queue: its jobs, fair share, and per flavour the quota, use and borrowing; the reasons its
    pending jobs wait."""
    if not queues:
        return _empty("No queues.")
    rows = []
    for q in sorted(queues, key=lambda q: q.name):
        resources = _resource_rows(q)
        reasons = pending.get(q.name, {})
        reason_html = (
            "<ul>"
            + "".join(f"<li>{esc(code)} <b>{n}</b></li>" for code, n in sorted(reasons.items()))
            + "</ul>"
            if reasons
            else "-"
        )
        state = "stopped" if q.stopped else "open"
        head = [
            (esc(q.name), ""),
            (esc(q.cohort or "-"), ""),
            (state, ""),
            (str(q.pending_jobs), "num"),
            (str(q.running_jobs), "num"),
            (f"{q.dominant_share:.2f}", "num"),
        ]
        rows += _row_group(f'data-queue="{esc(q.name)}"', head, resources, [(reason_html, "")])
    return _table(
        (
            "queue",
            "cohort",
            "state",
            "pending",
            "running",
            "dominant share",
            "flavour",
            "guaranteed",
            "maximum",
            "used",
            "borrowed",
            "borrowing limit",
            "lending limit",
            "pending reasons",
        ),
        rows,
    )


# --- jobs ----------------------------------------------------------------------------------------


def job_href(job_id: str) -> str:
    return f"/jobs/{quote(job_id, safe='')}"


def _state(state: int) -> str:
    name = state_name(state)
    return f'<span class="state state-{esc(name.lower())}">{esc(name)}</span>'


def _reason(reason: pb.PendingReason) -> str:
    if not reason.code:
        return "-"
    return esc(f"{reason.code}: {reason.message}" if reason.message else reason.code)


def jobs_table(jobs: Sequence[pb.Job]) -> str:
    """The job list, newest first as given: state, queue, tasks, where they run, why a job waits."""
    if not jobs:
        return _empty("No jobs yet.")
    rows = []
    for j in jobs:
        placed = sum(1 for t in j.tasks if t.node_id)
        total = len(j.tasks) or sum(max(t.replicas, 1) for t in j.spec.tasks)
        rows.append(
            f'<tr data-job="{esc(j.id)}"><td><a href="{esc(job_href(j.id))}">{esc(j.spec.name or j.id)}</a>'
            f"<br><small>{esc(j.id)}</small></td><td>{esc(j.spec.queue)}</td><td>{_state(j.state)}</td>"
            f'<td class="num">{placed}/{total}</td><td>{esc(", ".join(j.regions) or "-")}</td>'
            f"<td>{_reason(j.pending_reason)}</td><td>{esc(timestamp(j.submitted_at))}</td></tr>"
        )
    return (
        "<table><thead><tr><th>job</th><th>queue</th><th>state</th><th>placed</th><th>regions</th>"
        f"<th>pending reason</th><th>submitted</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def job_summary(job: pb.Job) -> str:
    spec = job.spec
    items = [
        ("id", esc(job.id)),
        ("name", esc(spec.name or "-")),
        ("queue", esc(spec.queue)),
        ("state", _state(job.state)),
        ("priority class", esc(spec.priority_class or "-")),
        ("regions", esc(", ".join(job.regions) or "-")),
        ("restarts", str(job.restarts)),
        ("pending reason", _reason(job.pending_reason)),
        ("price per hour", f"{job.price_per_hour:.4f}" if job.HasField("price_per_hour") else "-"),
        ("submitted", esc(timestamp(job.submitted_at))),
        ("updated", esc(timestamp(job.updated_at))),
    ]
    body = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="fields">{body}</dl>'


def tasks_table(job: pb.Job) -> str:
    """Each task and its placement: node, region, GPU slots, attempt, exit code, reason."""
    if not job.tasks:
        return _empty("No tasks placed yet.")
    rows = [
        f"<tr><td>{esc(t.task_id)}</td><td>{esc(t.state or '-')}</td><td>{esc(t.node_id or '-')}</td>"
        f"<td>{esc(t.region or '-')}</td><td>{esc(gpu_slots(t))}</td><td class=num>{t.attempt}</td>"
        f"<td class=num>{t.exit_code if t.state in ('succeeded', 'failed', 'stopped') else '-'}</td>"
        f"<td class=num>{f'{t.rtt_ms:.1f}' if t.HasField('rtt_ms') else '-'}</td>"
        f"<td>{esc(t.reason or '-')}</td></tr>"
        for t in job.tasks
    ]
    return (
        "<table><thead><tr><th>task</th><th>state</th><th>node</th><th>region</th><th>GPUs</th>"
        "<th>attempt</th><th>exit code</th><th>RTT ms</th><th>reason</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _when(message: Message, name: str) -> str:
    return esc(timestamp(getattr(message, name))) if message.HasField(name) else "-"


def _cause(event: pb.HistoryEvent) -> str:
    """Who or what caused ``event``, where its message does not already say so."""
    parts = [f"by {event.by}" if event.by and event.by not in event.message else ""]
    parts.append(event.reason if event.reason and event.reason not in event.message else "")
    if event.HasField("exit_code") and f"exit code {event.exit_code}" not in event.message:
        parts.append(f"exit code {event.exit_code}")
    cause = "; ".join(p for p in parts if p)
    return f' <small class="cause">({esc(cause)})</small>' if cause else ""


def timeline(described: pb.JobDescription) -> str:
    """The job's whole recorded history, oldest first: each event with its time, type, task and
    attempt, message and cause (DescribeJob reads the job's event stream, so a job the console never
    showed before still has its submission, placements and requeues)."""
    if not described.events:
        return _empty("No events recorded yet.")
    rows = []
    for e in described.events:
        task = f" {e.task_id}" + (f" (attempt {e.attempt})" if e.attempt else "") if e.task_id else ""
        node = f" on {e.node_id}" if e.node_id and e.node_id not in e.message else ""
        message = f": {e.message}" if e.message else ""
        rows.append(
            f'<li data-event="{esc(e.type)}"><time>{esc(timestamp(e.at))}</time> <b>{esc(e.type)}</b>'
            f"{esc(task)}{esc(node)}{esc(message)}{_cause(e)}</li>"
        )
    return f'<ol class="timeline">{"".join(rows)}</ol>'


def attempts(described: pb.JobDescription) -> str:
    """What the job used (`suanli acct`'s figures), then each attempt of each task with its placement,
    when it ran and how it ended."""
    used = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in accounting_fields(described.accounting))
    if not described.attempts:
        return f'<dl class="fields">{used}</dl>' + _empty("No attempts yet: no task was placed.")
    rows = [
        f"<tr><td>{esc(a.task_id)}</td><td class=num>{a.attempt}</td><td>{esc(a.node_id or '-')}</td>"
        f"<td>{esc(a.region or '-')}</td>"
        f"<td>{esc(gpu_slots(pb.TaskStatus(gpu_indices=a.gpu_indices, gpu_milli=a.gpu_milli)))}</td>"
        f"<td>{_when(a, 'placed_at')}</td><td>{_when(a, 'started_at')}</td><td>{_when(a, 'ended_at')}</td>"
        f"<td class=num>{esc(duration(a.running_s))}</td><td>{esc(a.outcome or '-')}</td>"
        f"<td class=num>{a.exit_code if a.HasField('exit_code') else '-'}</td>"
        f"<td>{esc(a.reason or '-')}</td></tr>"
        for a in described.attempts
    ]
    return (
        f'<dl class="fields">{used}</dl>'
        "<table><thead><tr><th>task</th><th>attempt</th><th>node</th><th>region</th><th>GPUs</th>"
        "<th>placed</th><th>started</th><th>ended</th><th>ran</th><th>outcome</th><th>exit code</th>"
        f"<th>reason</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def explanation(explained: pb.Explanation) -> str:
    """ExplainJob's answer: the reason, its details, the best nodes and what the filters rejected."""
    parts = [f"<p>{_state(explained.state)} {_reason(explained.pending_reason)}</p>"]
    details = explained.pending_reason.details
    if details:
        parts.append(
            '<dl class="fields">'
            + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in sorted(details.items()))
            + "</dl>"
        )
    if explained.regions:
        parts.append(
            "<h3>Regions</h3><table><thead><tr><th>region</th><th>verdict</th></tr></thead><tbody>"
            + "".join(
                f"<tr><td>{esc(v.region)}</td><td>{esc(v.verdict)}</td></tr>" for v in explained.regions
            )
            + "</tbody></table>"
        )
    if explained.top_nodes:
        parts.append(
            "<h3>Best nodes</h3><table><thead><tr><th>node</th><th>score</th><th>by plugin</th></tr>"
            "</thead><tbody>"
            + "".join(
                f"<tr><td>{esc(n.node_id)}</td><td class=num>{n.score:.3f}</td><td>"
                + esc(", ".join(f"{k} {v:.3f}" for k, v in sorted(n.plugin_scores.items())) or "-")
                + "</td></tr>"
                for n in explained.top_nodes
            )
            + "</tbody></table>"
        )
    if explained.rejected_by_filter:
        parts.append(
            "<h3>Nodes rejected by filter</h3><table><thead><tr><th>filter</th><th>nodes</th></tr></thead>"
            "<tbody>"
            + "".join(
                f"<tr><td>{esc(k)}</td><td class=num>{v}</td></tr>"
                for k, v in sorted(explained.rejected_by_filter.items())
            )
            + "</tbody></table>"
        )
    return "".join(parts)


# --- network -------------------------------------------------------------------------------------


def network_matrix(matrix: rpb.NetworkMatrix) -> str:
    """Region x region: RTT, loss and status of each measured path, coloured by status."""
    if not matrix.regions:
        return _empty("No network measurements yet.")
    links = {(link.src_region, link.dst_region): link for link in matrix.region_links}
    head = "".join(f'<th scope="col">{esc(r)}</th>' for r in matrix.regions)
    rows = []
    for src in matrix.regions:
        cells = []
        for dst in matrix.regions:
            link = links.get((src, dst))
            if link is None:
                cells.append('<td class="link none">-</td>')
                continue
            status = _LINK_STATUS.get(link.status, "unknown")
            title = f"{src} → {dst}: {status}" + (f" ({link.reason})" if link.reason else "")
            bandwidth = (
                f"<br><small>{link.bandwidth_mbps / 1000:.1f} Gbit/s</small>" if link.bandwidth_mbps else ""
            )
            cells.append(
                f'<td class="link link-{status}" title="{esc(title)}">{link.rtt_ms:.1f} ms'
                f"<br><small>loss {100 * link.loss_ratio:.1f}%</small>{bandwidth}</td>"
            )
        rows.append(f'<tr><th scope="row">{esc(src)}</th>{"".join(cells)}</tr>')
    return (
        f'<table class="matrix"><thead><tr><th>from \\ to</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# --- services ------------------------------------------------------------------------------------

READY = "running"  # a replica's state once its model server runs (serving.proto, Replica.state)


def _load(replica: spb.Replica) -> str:
    # Blank while the replica sends no fresh load report (services.load), as `suanli service get`.
    if not replica.HasField("load"):
        return '<td class="num none" colspan="4">no fresh report</td>'
    load = replica.load
    return (
        f"<td class=num>{load.in_flight}</td><td class=num>{load.queued}</td>"
        f"<td class=num>{load.recent_latency_s:.3f}</td><td class=num>{load.kv_free_tokens}</td>"
    )


def services_table(services: Sequence[spb.Service]) -> str:
    """Each inference service: model, state, replicas desired / placed / ready (running) within
    min..max; under it each replica with its state, placement and latest load report."""
    if not services:
        return _empty("No inference services.")
    rows = []
    for s in sorted(services, key=lambda s: (s.tenant, s.name)):
        ready = sum(1 for r in s.replicas if r.state == READY)
        replicas = [
            f"<td>{esc(r.replica_id)}</td><td>{esc(r.state)}</td>"
            f"<td>{esc(r.node_id or '-')}</td><td>{esc(r.region or r.pinned_region or '-')}</td>{_load(r)}"
            for r in s.replicas
        ] or ['<td colspan="8">-</td>']
        head = [
            (f"{esc(s.tenant)}/{esc(s.name)}", ""),
            (esc(s.model), ""),
            (esc(s.state), ""),
            (str(s.desired_replicas), "num"),
            (str(s.placed_replicas), "num"),
            (str(ready), "num"),
            (f"{s.min_replicas}–{s.max_replicas}", "num"),
        ]
        rows += _row_group(f'data-service="{esc(s.tenant)}/{esc(s.name)}"', head, replicas)
    return _table(
        (
            "service",
            "model",
            "state",
            "desired",
            "placed",
            "ready",
            "min–max",
            "replica",
            "replica state",
            "node",
            "region",
            "in flight",
            "queued",
            "latency s",
            "KV free tokens",
        ),
        rows,
    )


# --- charges -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TenantUsage:
    """One tenant's usage in the current billing period; None with a note when billing has none."""

    tenant: str
    usage: bpb.GetUsageResponse | None
    note: str = ""


def charges_table(usages: Sequence[TenantUsage]) -> str:
    """Each tenant's charges in the current period, by device class and region, with its total."""
    if not usages:
        return _empty("No tenants.")
    rows = []
    for t in sorted(usages, key=lambda t: t.tenant):
        if t.usage is None:
            rows.append(
                f'<tr data-tenant="{esc(t.tenant)}"><td>{esc(t.tenant)}</td><td colspan="6">'
                f"{esc(t.note or '-')}</td></tr>"
            )
            continue
        u = t.usage
        lines = u.rows or [bpb.UsageRow()]
        span = f' rowspan="{len(lines)}"'
        for i, r in enumerate(lines):
            head = f"<td{span}>{esc(t.tenant)}</td><td{span}>{esc(u.period.label)}</td>" if i == 0 else ""
            tail = (
                f'<td{span} class="num total">{esc(u.total or "0")} {esc(u.currency)}</td>' if i == 0 else ""
            )
            rows.append(
                f'<tr data-tenant="{esc(t.tenant)}">{head}<td>{esc(r.device_class or "-")}</td>'
                f"<td>{esc(r.region or '-')}</td><td class=num>{esc(r.cu_hours or '0')}</td>"
                f"<td class=num>{esc(r.amount or '0')}</td>{tail}</tr>"
            )
    return (
        "<table><thead><tr><th>tenant</th><th>period</th><th>device class</th><th>region</th>"
        "<th>CU hours</th><th>amount</th><th>total</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# --- frame ---------------------------------------------------------------------------------------


_HEAD = '<link rel="icon" href="/static/favicon.svg"><link rel="stylesheet" href="/static/console.css">'


def document(page: Page, path: str, stream: str, headings: Mapping[str, str]) -> str:
    """The whole HTML document of ``page``: the navigation, each fragment under its heading, and the
    script that keeps them live over the event stream at ``stream``."""
    nav = "".join(
        f'<a href="{href}"{" aria-current=page" if href == path else ""}>{esc(label)}</a>'
        for href, label in NAV
    )
    sections = "".join(
        f"<h2>{esc(headings.get(fid, ''))}</h2>" * bool(headings.get(fid))
        + f'<section id="{esc(fid)}">{body}</section>'
        for fid, body in page.fragments.items()
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(page.title)} · Suanli console</title>"
        f'{_HEAD}<script src="/static/console.js" defer></script>'
        f"</head><body><header><strong>Suanli 算力</strong><nav>{nav}</nav>"
        '<span id="live-status" class="live-status">connecting…</span>'
        '<form method="post" action="/logout"><button type="submit">Log out</button></form></header>'
        f'<main data-stream="{esc(stream)}"><h1>{esc(page.title)}</h1>{sections}</main></body></html>'
    )


def login_document(error: str, next_path: str) -> str:
    """The login form: the token goes in a POST body, never in a URL."""
    message = f'<p class="error">{esc(error)}</p>' if error else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Log in · Suanli console</title>'
        f'{_HEAD}</head><body class="login"><main>'
        f"<h1>Suanli console</h1>{message}"
        '<form method="post" action="/login"><label for="token">Access token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        '<button type="submit">Log in</button></form>'
        "<p><small>The token of the console's context (docs/console.md).</small></p></main></body></html>"
    )
