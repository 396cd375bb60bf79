"""Scheduler answers as text: list answers as `Rows` (suanli.cli.output writes them in every format),
detail views for people, proto field names for scripts.

Pure functions of the messages they are given (no clock, no I/O), so they are tested as units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.output import Rows

GPU_MILLI = 1000
FINAL_STATES = frozenset({pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED})
_STATE_STYLES: dict[int, str] = {
    pb.JOB_STATE_PENDING: "yellow",
    pb.JOB_STATE_RUNNING: "cyan",
    pb.JOB_STATE_SUCCEEDED: "green",
    pb.JOB_STATE_FAILED: "red",
    pb.JOB_STATE_CANCELLED: "magenta",
}


def _kind(kind: int) -> str:
    # On use, like _memory: importing suanli.jobspec loads the pydantic spec models, which a CLI start
    # (and every error before an answer) should not wait for.
    from suanli.jobspec import kind_name

    return kind_name(kind)


def _memory(mib: int) -> str:
    from suanli.jobspec.units import format_memory

    return format_memory(mib)


def state_name(state: int) -> str:
    """JOB_STATE_RUNNING -> Running."""
    full = pb.JobState.Name(state) if state in pb.JobState.values() else "JOB_STATE_UNSPECIFIED"
    return full.removeprefix("JOB_STATE_").capitalize()


def parse_state(text: str) -> int:
    """A --state value ("running", "RUNNING", "JOB_STATE_RUNNING") as the wire enum."""
    name = text.strip().upper()
    name = name if name.startswith("JOB_STATE_") else f"JOB_STATE_{name}"
    states = dict(pb.JobState.items())
    if not states.get(name):
        choices = ", ".join(state_name(v).lower() for v in states.values() if v)
        raise ValueError(f"unknown state {text!r}; one of {choices}")
    return states[name]


def _styled_state(state: int) -> Text:
    return Text(state_name(state), style=_STATE_STYLES.get(state, ""))


def timestamp(value: Timestamp) -> str:
    if not value.seconds and not value.nanos:
        return "-"
    return value.ToDatetime().strftime("%Y-%m-%d %H:%M:%SZ")


def cores(milli: int) -> str:
    """Milli-cores as cores: 60500 -> "60.5" (tables compare amounts, so one unit reads best)."""
    return f"{milli / 1000:g}"


def gpus(milli: int) -> str:
    """Milli-GPU as GPUs: 3000 -> "3", 300 -> "0.3"."""
    return f"{milli / GPU_MILLI:g}"


# --- machine-readable --------------------------------------------------------------------------


def to_data(message: Message) -> dict[str, Any]:
    # Field names as in the .proto and in the YAML spec; unset scalars printed so scripts see every key.
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


# --- jobs --------------------------------------------------------------------------------------


def requested_gpu_milli(spec: pb.JobSpec) -> int:
    return sum(max(t.replicas, 1) * t.resources.gpu_count * t.resources.gpu_milli for t in spec.tasks)


def _task_total(job: pb.Job) -> int:
    return len(job.tasks) or sum(max(t.replicas, 1) for t in job.spec.tasks)


def _reason_line(reason: pb.PendingReason) -> str:
    if not reason.code:
        return ""
    return f"{reason.code}: {reason.message}" if reason.message else reason.code


def jobs_rows(jobs: Iterable[pb.Job]) -> Rows:
    """The job list; `-o wide` adds the priority class, where the tasks run, the labels, the update, and
    a waiting job's queue position and estimated start (like `squeue --start`)."""
    jobs = list(jobs)
    rows = []
    for job in jobs:
        running = sum(1 for t in job.tasks if t.state.lower() == "running")
        nodes = sorted({t.node_id for t in job.tasks if t.node_id})
        rows.append(
            (
                job.id,
                job.spec.name,
                job.spec.queue,
                _kind(job.spec.kind),
                _styled_state(job.state),
                f"{running}/{_task_total(job)}",
                gpus(requested_gpu_milli(job.spec)),
                timestamp(job.submitted_at),
                job.pending_reason.code,
                job.spec.priority_class or "-",
                ",".join(job.regions) or "-",
                ",".join(nodes) or "-",
                _mapping(job.spec.labels),
                timestamp(job.updated_at),
                f"{job.queue_position}/{job.queue_waiting}" if job.HasField("queue_position") else "-",
                _estimated_start(job) if job.HasField("queue_position") else "-",
            )
        )
    return Rows(
        JOB_COLUMNS,
        rows,
        wide=frozenset(JOB_COLUMNS[9:]),
        wrap=frozenset({"reason"}),
        kind="job",
        names=[j.id for j in jobs],
        items=[to_data(j) for j in jobs],
        key="jobs",
    )


JOB_COLUMNS = (
    "id",
    "name",
    "queue",
    "kind",
    "state",
    "tasks",
    "gpu",
    "submitted",
    "reason",
    "priority_class",
    "regions",
    "nodes",
    "labels",
    "updated",
    "position",
    "est_start",
)


def gpu_slots(task: pb.TaskStatus) -> str:
    if not task.gpu_indices:
        return "-"
    shares = list(task.gpu_milli) or [GPU_MILLI] * len(task.gpu_indices)
    return ",".join(
        str(index) if milli == GPU_MILLI else f"{index}@{gpus(milli)}"
        for index, milli in zip(task.gpu_indices, shares, strict=False)
    )


def _fields(rows: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for name, value in rows:
        grid.add_row(name, value if isinstance(value, Text) else Text(str(value)))
    return grid


def _mapping(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def _estimated_start(job: pb.Job, why: bool = False) -> str:
    """When a waiting job may start, or "unknown" (with ``why``: and the reason the scheduler gives)."""
    if job.HasField("estimated_start_at"):
        return timestamp(job.estimated_start_at)
    return f"unknown: {job.estimated_start_note}" if why and job.estimated_start_note else "unknown"


def job_detail(job: pb.Job) -> RenderableType:
    spec = job.spec
    rows: list[tuple[str, Any]] = [
        ("ID", job.id),
        ("Name", spec.name),
        ("Queue", spec.queue),
        ("Kind", _kind(spec.kind)),
        ("State", _styled_state(job.state)),
        ("Priority class", spec.priority_class or "-"),
        ("Preemptible", "yes" if spec.preemptible else "no"),
        ("Best effort", "yes" if spec.best_effort else "no"),
        ("Gang", f"{spec.min_available or _task_total(job)} of {_task_total(job)} tasks"),
        ("Restarts", f"{job.restarts} (max retries {spec.max_retries})"),
        ("Labels", _mapping(spec.labels)),
        ("Network", _network_line(spec)),
        ("Regions", ", ".join(job.regions) or "-"),
        ("Price / h", _price(job.price_per_hour) if job.HasField("price_per_hour") else "-"),
        ("Submitted", timestamp(job.submitted_at)),
        ("Updated", timestamp(job.updated_at)),
    ]
    if job.pending_reason.code:
        rows.append(("Pending", _reason_line(job.pending_reason)))
    if job.HasField("queue_position"):
        where = f"{job.queue_position} of {job.queue_waiting} waiting in {spec.queue}"
        rows += [("Queue position", where), ("Estimated start", _estimated_start(job, why=True))]
    parts: list[RenderableType] = [_fields(rows)]
    if job.tasks:
        tasks = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
        for column in (
            "TASK",
            "STATE",
            "NODE",
            "REGION",
            "RTT",
            "PRICE/H",
            "GPUS",
            "ATTEMPT",
            "EXIT",
            "REASON",
        ):
            tasks.add_column(column)
        for task in job.tasks:
            tasks.add_row(
                task.task_id,
                task.state,
                task.node_id or "-",
                task.region or "-",
                f"{task.rtt_ms:.1f} ms" if task.HasField("rtt_ms") else "-",
                _price(task.price_per_hour) if task.HasField("price_per_hour") else "-",
                gpu_slots(task),
                str(task.attempt),
                str(task.exit_code) if task.state.lower() in _ENDED else "-",
                task.reason or "",
            )
        parts += [Text(""), tasks]
    return Group(*parts)


def duration(seconds: float) -> str:
    """Seconds as sacct writes elapsed time: [D-]HH:MM:SS."""
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _optional_time(message: Message, field: str) -> str:
    return timestamp(getattr(message, field)) if message.HasField(field) else "-"


def _events_table(events: Sequence[pb.HistoryEvent]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", title="Events", title_justify="left")
    for column in ("TIME", "TYPE", "TASK", "ATTEMPT", "MESSAGE"):
        table.add_column(column, no_wrap=column != "MESSAGE")
    for event in events:
        table.add_row(
            timestamp(event.at),
            event.type,
            event.task_id or "-",
            str(event.attempt) if event.attempt else "-",
            event.message,
        )
    return table


def _attempts_table(attempts: Sequence[pb.TaskAttempt]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", title="Attempts", title_justify="left")
    for column in ("TASK", "ATTEMPT", "NODE", "REGION", "GPUS", "STARTED", "ENDED", "RAN", "OUTCOME", "EXIT"):
        table.add_column(column)
    for a in attempts:
        table.add_row(
            a.task_id,
            str(a.attempt),
            a.node_id,
            a.region or "-",
            gpu_slots(pb.TaskStatus(gpu_indices=a.gpu_indices, gpu_milli=a.gpu_milli)),
            _optional_time(a, "started_at"),
            _optional_time(a, "ended_at"),
            duration(a.running_s),
            a.outcome,
            str(a.exit_code) if a.HasField("exit_code") else "-",
        )
    return table


def accounting_fields(acct: pb.JobAccounting) -> list[tuple[str, str]]:
    return [
        ("Attempts", str(acct.attempts)),
        ("Waited", duration(acct.wait_s)),
        ("Elapsed", duration(acct.elapsed_s)),
        ("GPU-hours", f"{acct.gpu_hours:.3f}"),
        ("CPU-hours", f"{acct.cpu_hours:.3f}"),
        ("Expected cost", _price(acct.cost) if acct.HasField("cost") else "-"),
    ]


def description(described: pb.JobDescription) -> RenderableType:
    """`job describe`: the job as `job get` shows it, what it used, its attempts and its events."""
    parts: list[RenderableType] = [job_detail(described.job), Text("")]
    parts.append(_fields(accounting_fields(described.accounting)))  # the queue position: job_detail's
    if described.attempts:
        parts += [Text(""), _attempts_table(described.attempts)]
    parts += [Text(""), _events_table(described.events)]
    return Group(*parts)


_LOCALITY_NAMES = {
    pb.LOCALITY_NODE: "node",
    pb.LOCALITY_FABRIC: "fabric",
    pb.LOCALITY_ZONE: "zone",
    pb.LOCALITY_REGION: "region",
    pb.LOCALITY_ANY: "any",
}


def _network_line(spec: pb.JobSpec) -> str:
    """The job's network-aware placement fields, as one line ('-' when it set none)."""
    parts = []
    if spec.data_region:
        parts.append(f"data region {spec.data_region}")
    if spec.HasField("max_rtt_ms"):
        parts.append(f"max RTT {spec.max_rtt_ms:g} ms")
    if spec.locality:
        parts.append(f"locality {_LOCALITY_NAMES.get(spec.locality, spec.locality)}")
    if spec.HasField("min_bandwidth_gbps"):
        parts.append(f"min bandwidth {spec.min_bandwidth_gbps:g} Gbit/s")
    return ", ".join(parts) or "-"


def _price(value: float) -> str:
    return f"{value:.4f}"


# TaskStatus.state values after which an exit code means something.
_ENDED = frozenset({"succeeded", "failed", "stopped"})


def event_line(event: pb.JobEvent) -> Text:
    line = Text(f"{timestamp(event.at)}  ")
    line.append(f"{state_name(event.state):<9}", style=_STATE_STYLES.get(event.state, ""))
    line.append(f"  {event.event}")
    if event.task_id:
        line.append(f" {event.task_id}" + (f" (attempt {event.attempt})" if event.attempt else ""))
    if event.message:
        line.append(f": {event.message}")
    return line


def explanation(explained: pb.Explanation) -> RenderableType:
    reason = explained.pending_reason
    head: list[tuple[str, Any]] = [("Job", explained.job_id), ("State", _styled_state(explained.state))]
    if reason.code:
        head += [("Reason", reason.code), ("Message", reason.message or "-")]
    parts: list[RenderableType] = [_fields(head)]
    details = {k: v for k, v in reason.details.items() if not (explained.regions and k == "regions")}
    if details:
        parts.append(_fields([(f"  {k}", v) for k, v in sorted(details.items())]))
    if explained.regions:
        regions = Table(box=None, pad_edge=False, header_style="bold")
        regions.add_column("REGION")
        regions.add_column("VERDICT")
        for verdict in explained.regions:
            regions.add_row(verdict.region, verdict.verdict)
        parts += [Text(""), regions]
    if explained.rejected_by_filter:
        rejected = Table(box=None, pad_edge=False, header_style="bold")
        rejected.add_column("FILTER")
        rejected.add_column("NODES REJECTED", justify="right")
        for name, count in sorted(explained.rejected_by_filter.items(), key=lambda kv: (-kv[1], kv[0])):
            rejected.add_row(name, str(count))
        parts += [Text(""), rejected]
    if explained.top_nodes:
        plugins = sorted({p for n in explained.top_nodes for p in n.plugin_scores})
        scores = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("NODE", "SCORE", *(p.upper() for p in plugins)):
            scores.add_column(column, justify="left" if column == "NODE" else "right")
        for node in explained.top_nodes:
            scores.add_row(
                node.node_id,
                f"{node.score:.2f}",
                *(f"{node.plugin_scores[p]:.2f}" if p in node.plugin_scores else "-" for p in plugins),
            )
        parts += [Text(""), scores]
    if not (reason.code or explained.rejected_by_filter or explained.top_nodes or explained.regions):
        parts.append(Text("nothing to explain: the scheduler recorded no decision for this job yet"))
    return Group(*parts)


# --- nodes and queues --------------------------------------------------------------------------


def _gpu_summary(node: pb.Node) -> tuple[str, str]:
    if not node.devices:
        return "-", "-"
    models: dict[str, int] = {}
    for device in node.devices:
        models[device.model] = models.get(device.model, 0) + 1
    kinds = ", ".join(f"{count}x {model}" for model, count in models.items())
    free = sum(d.free_milli for d in node.devices)
    return kinds, f"{gpus(free)}/{len(node.devices)}"


NODE_COLUMNS = ("node", "region", "zone", "status", "cpu_free", "memory_free", "gpus", "gpu_free", "labels")


def nodes_rows(nodes: Iterable[pb.Node]) -> Rows:
    """The fleet; `-o wide` adds the node's labels."""
    nodes = list(nodes)
    rows = []
    for node in nodes:
        kinds, free = _gpu_summary(node)
        rows.append(
            (
                node.id,
                node.region,
                node.zone,
                node.status,
                f"{cores(node.free_cpu_milli)}/{cores(node.cpu_milli)}",
                f"{_memory(node.free_memory_mib)}/{_memory(node.memory_mib)}",
                kinds,
                free,
                _mapping(node.labels),
            )
        )
    return Rows(
        NODE_COLUMNS,
        rows,
        wide=frozenset({"labels"}),
        kind="node",
        names=[n.id for n in nodes],
        items=[to_data(n) for n in nodes],
        key="nodes",
    )


def amount(flavour: str, value: int) -> str:
    """A quota amount in the flavour's unit: cpu milli -> cores, memory MiB -> Gi, gpu milli -> GPUs."""
    if flavour == "cpu":
        return cores(value)
    if flavour == "memory":
        return _memory(value)
    if flavour.startswith("gpu"):
        return gpus(value)
    return str(value)


def _usage(resource: pb.ResourceAmount) -> str:
    if not resource.guaranteed:
        return "-"
    return f"{100 * resource.used / resource.guaranteed:.0f}%"


def _limit(resource: pb.ResourceAmount, field: str) -> str:
    """An optional limit in the flavour's unit; "-" when the queue sets none."""
    if not resource.HasField(field):
        return "-"
    return amount(resource.flavour, getattr(resource, field))


QUEUE_COLUMNS = (
    "queue",
    "cohort",
    "pending",
    "running",
    "share",
    "flavour",
    "used",
    "guaranteed",
    "maximum",
    "borrowed",
    "borrow_limit",
    "lend_limit",
    "use/guar",
)


def queues_rows(queues: Iterable[pb.Queue]) -> Rows:
    """One row per queue and flavour; the table shows the queue's own columns on its first row only."""
    rows: list[tuple[str, ...]] = []
    names: list[str] = []
    items: list[Any] = []
    for queue in queues:
        data = to_data(queue)
        head = (
            queue.name + (" (stopped)" if queue.stopped else ""),
            queue.cohort or "-",
            str(queue.pending_jobs),
            str(queue.running_jobs),
            f"{queue.dominant_share:.2f}",
        )
        for resource in queue.resources or [pb.ResourceAmount()]:
            f = resource.flavour
            rows.append(
                (
                    *head,
                    f or "-",
                    amount(f, resource.used),
                    amount(f, resource.guaranteed),
                    # Unset: the queue has no ceiling of its own beyond what its cohort lends.
                    _limit(resource, "maximum"),
                    amount(f, resource.borrowed) if resource.borrowed else "-",
                    _limit(resource, "borrowing_limit"),
                    _limit(resource, "lending_limit"),
                    _usage(resource),
                )
            )
            names.append(queue.name)
            items.append(data)
    return Rows(
        QUEUE_COLUMNS,
        rows,
        right=frozenset(QUEUE_COLUMNS) - {"queue", "cohort", "flavour"},
        kind="queue",
        names=names,
        items=items,
        key="queues",
        group=5,
    )
