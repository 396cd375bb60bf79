"""`suanli queue ...`: administer queues (create, update, delete), read them (get, list), and the
priority classes (`suanli queue priority-class list|set|delete`). Changes need a platform-admin token
when the scheduler runs with authentication; every change is recorded as an event (docs/queues.md).

Amounts are in the flavour's unit, as in the queue file: cpu in milli-CPU, memory in MiB, gpu:<model> in
milli-GPU (1000 = one device).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli import watching
from suanli.cli.client import (
    DEFAULT_ADDRESS,
    EXIT_USAGE,
    UNARY_TIMEOUT_S,
    Failure,
    SchedulerOption,
    fail,
    scheduler,
)
from suanli.cli.output import (
    TABLE,
    NoHeadersOption,
    Output,
    OutputOption,
    Rows,
    SortByOption,
    emit,
    emit_rows,
    stdout,
)
from suanli.cli.queues import all_queues
from suanli.cli.render import queues_rows, to_data
from suanli.cli.watching import IntervalOption, WatchOption

if TYPE_CHECKING:
    from suanli.api.scheduler.v1.scheduler_pb2_grpc import SchedulerStub
    from suanli.scheduling.service_layer.queues_config import QueueConfig

app = typer.Typer(help="Administer queues, quotas, cohorts and priority classes.", no_args_is_help=True)
classes_app = typer.Typer(help="Priority classes: list, set, delete.", no_args_is_help=True)
app.add_typer(classes_app, name="priority-class")

QueueName = Annotated[str, typer.Argument(metavar="NAME", help="Queue path, tenant first: acme/vision.")]
QUOTA_HELP = (
    "FLAVOUR=GUARANTEED[,max=N][,borrow=N][,lend=N], e.g. 'gpu:A100=8000,borrow=4000' (repeatable; "
    "cpu in milli-CPU, memory in MiB, gpu:<model> in milli-GPU)."
)
QuotaOption = Annotated[list[str] | None, typer.Option("--quota", help=QUOTA_HELP, show_default=False)]
FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        "-f",
        help="YAML: one queue (name, cohort, stopped, quotas) or a queue file (queues:, priority_classes:).",
        show_default=False,
    ),
]
CohortOption = Annotated[str | None, typer.Option("--cohort", help="Cohort to lend to and borrow from.")]
_LIMITS = {
    "max": "maximum",
    "maximum": "maximum",
    "borrow": "borrowing_limit",
    "borrowing_limit": "borrowing_limit",
    "lend": "lending_limit",
    "lending_limit": "lending_limit",
}


def parse_quota(value: str) -> pb.QuotaSpec:
    """`gpu:A100=8000,max=12000,borrow=4000,lend=2000` -> the QuotaSpec it says."""
    flavour, sep, rest = value.partition("=")
    flavour = flavour.strip()
    if not sep or not flavour:
        raise typer.BadParameter(
            f"{value!r}: expected FLAVOUR=GUARANTEED[,max=N][,borrow=N][,lend=N]", param_hint="--quota"
        )
    guaranteed, *limits = [part.strip() for part in rest.split(",")]
    quota = pb.QuotaSpec(flavour=flavour, guaranteed=_integer(guaranteed, value))
    for limit in limits:
        key, _, amount = limit.partition("=")
        field = _LIMITS.get(key.strip())
        if field is None:
            raise typer.BadParameter(
                f"{value!r}: unknown limit {key.strip()!r} (max, borrow, lend)", param_hint="--quota"
            )
        setattr(quota, field, _integer(amount.strip(), value))
    return quota


def _integer(text: str, value: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r}: {text!r} is not an integer amount", param_hint="--quota"
        ) from None


def _read(path: Path) -> QueueConfig:
    """A file of one queue or a queue file; parents may be queues the scheduler already has."""
    import yaml

    from suanli.scheduling.service_layer.queues_config import QueueConfigError, parse_queue_config

    try:
        text = path.read_text()
        data = yaml.safe_load(text)
        if isinstance(data, dict) and "name" in data:
            text = yaml.safe_dump({"queues": [data]})
        return parse_queue_config(text, complete=False)
    except (OSError, yaml.YAMLError, QueueConfigError) as exc:
        raise fail(Failure(f"invalid queue file {path}: {exc}", EXIT_USAGE)) from None


def _request_id() -> str:
    return str(uuid.uuid4())


def _done(output: Output, queue: pb.Queue, verb: str) -> None:
    if output.human:
        stdout.print(f"queue {queue.name} {verb}")
    else:
        emit(output, to_data(queue), "", name=f"queue/{queue.name}")


def _apply_file(file: Path, address: str, output: Output, update: bool) -> None:
    from suanli.scheduling.domain.queueing.admin import creation_order
    from suanli.scheduling.entrypoints.convert import queue_spec_message

    config = _read(file)
    with scheduler(address) as stub:
        for spec in creation_order(config.queues):
            message = queue_spec_message(spec)
            if update:
                request = pb.UpdateQueueRequest(queue=message, request_id=_request_id())
                _done(output, stub.UpdateQueue(request, timeout=UNARY_TIMEOUT_S), "updated")
            else:
                request = pb.CreateQueueRequest(queue=message, request_id=_request_id())
                _done(output, stub.CreateQueue(request, timeout=UNARY_TIMEOUT_S), "created")
        for c in config.priority_classes:
            _set_class(stub, c.name, c.value)


@app.command()
def create(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="Queue path (or use -f).")] = None,
    quota: QuotaOption = None,
    cohort: CohortOption = None,
    stopped: Annotated[bool, typer.Option("--stopped", help="Create it stopped (admits nothing).")] = False,
    file: FileOption = None,
    output: OutputOption = TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Create a queue; its parent (the path above it) must exist. With -f, every queue in the file."""
    if file is not None:
        _apply_file(file, address, output, update=False)
        return
    if not name:
        raise typer.BadParameter("give NAME or -f FILE", param_hint="NAME")
    spec = pb.QueueSpec(
        name=name, cohort=cohort or "", stopped=stopped, quotas=[parse_quota(q) for q in quota or ()]
    )
    with scheduler(address) as stub:
        created = stub.CreateQueue(
            pb.CreateQueueRequest(queue=spec, request_id=_request_id()), timeout=UNARY_TIMEOUT_S
        )
    _done(output, created, "created")


@app.command()
def update(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="Queue path (or use -f).")] = None,
    quota: QuotaOption = None,
    remove_quota: Annotated[
        list[str] | None,
        typer.Option(
            "--remove-quota",
            metavar="FLAVOUR",
            help="Drop this flavour's quota (repeatable).",
            show_default=False,
        ),
    ] = None,
    cohort: CohortOption = None,
    no_cohort: Annotated[bool, typer.Option("--no-cohort", help="Leave its cohort.")] = False,
    stop: Annotated[
        bool | None,
        typer.Option("--stop/--resume", help="Stop admitting new work, or resume.", show_default=False),
    ] = None,
    file: FileOption = None,
    output: OutputOption = TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Change a queue: the options given change, the rest stays. With -f, replace each queue in the file.

    --quota replaces a flavour the queue has and adds a new one; a lowered quota counts from the next cycle.
    """
    if file is not None:
        _apply_file(file, address, output, update=True)
        return
    if not name:
        raise typer.BadParameter("give NAME or -f FILE", param_hint="NAME")
    if cohort is not None and no_cohort:
        raise typer.BadParameter("--cohort and --no-cohort exclude each other", param_hint="--no-cohort")
    from suanli.scheduling.entrypoints.convert import spec_of_queue

    with scheduler(address) as stub:
        spec = spec_of_queue(stub.GetQueue(pb.GetQueueRequest(name=name), timeout=UNARY_TIMEOUT_S))
        _change(spec, [parse_quota(q) for q in quota or ()], remove_quota or [])
        if cohort is not None or no_cohort:
            spec.cohort = cohort or ""
        if stop is not None:
            spec.stopped = stop
        request = pb.UpdateQueueRequest(queue=spec, request_id=_request_id())
        updated = stub.UpdateQueue(request, timeout=UNARY_TIMEOUT_S)
    _done(output, updated, "updated")


def _change(spec: pb.QueueSpec, quotas: list[pb.QuotaSpec], removed: list[str]) -> None:
    by_flavour = {q.flavour: q for q in spec.quotas}
    missing = sorted(set(removed) - set(by_flavour))
    if missing:
        raise typer.BadParameter(
            f"queue {spec.name} has no quota for {', '.join(missing)}", param_hint="--remove-quota"
        )
    for flavour in removed:
        del by_flavour[flavour]
    for q in quotas:
        by_flavour[q.flavour] = (
            q  # dict order: a replaced flavour keeps its place (GPU models are tried in it)
        )
    del spec.quotas[:]
    spec.quotas.extend(by_flavour.values())


@app.command()
def delete(name: QueueName, address: SchedulerOption = DEFAULT_ADDRESS) -> None:
    """Delete a queue without child queues and without pending or running jobs."""
    with scheduler(address) as stub:
        request = pb.DeleteQueueRequest(name=name, request_id=_request_id())
        deleted = stub.DeleteQueue(request, timeout=UNARY_TIMEOUT_S)
    stdout.print(f"queue {deleted.name} deleted")


@app.command()
def get(
    name: QueueName,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Show one queue: quota, usage and borrowing per flavour, cohort, pending and running jobs."""
    with scheduler(address) as stub:
        queue = stub.GetQueue(pb.GetQueueRequest(name=name), timeout=UNARY_TIMEOUT_S)
    emit_rows(output, to_data(queue), queues_rows([queue]), no_headers=no_headers)


@app.command("list")
def list_command(
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    watch_rows: WatchOption = False,
    interval: IntervalOption = 2.0,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List queues: quota, usage and borrowing per flavour, borrowing and lending limits, cohort.

    With --watch, each queue's rows again as they change (usage, borrowing), until Ctrl-C.
    """
    with scheduler(address) as stub:

        def answer() -> tuple[dict[str, Any], Rows]:
            queues = all_queues(stub)
            return {"queues": [to_data(q) for q in queues]}, queues_rows(queues)

        if watch_rows:
            watching.watch(answer, output, interval_s=interval, no_headers=no_headers, sort_by=sort_by)
            return
        data, rows = answer()
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)


# -- priority classes ----------------------------------------------------------------------------------


def _set_class(stub: SchedulerStub, name: str, value: int) -> pb.PriorityClass:
    request = pb.DefinePriorityClassRequest(
        priority_class=pb.PriorityClass(name=name, value=value), request_id=_request_id()
    )
    defined: pb.PriorityClass = stub.DefinePriorityClass(request, timeout=UNARY_TIMEOUT_S)
    stdout.print(f"priority class {defined.name} = {defined.value}")
    return defined


@classes_app.command("list")
def classes_list(
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """The priority classes, highest first."""
    with scheduler(address) as stub:
        answer = stub.ListPriorityClasses(pb.ListPriorityClassesRequest(), timeout=UNARY_TIMEOUT_S)
    found = list(answer.priority_classes)
    rows = Rows(
        ("class", "value"),
        [(c.name, str(c.value)) for c in found],
        right=frozenset({"value"}),
        kind="priorityclass",
        items=[to_data(c) for c in found],
        key="priority_classes",
    )
    emit_rows(output, to_data(answer), rows, no_headers=no_headers, sort_by=sort_by)


@classes_app.command("set")
def classes_set(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Class name, as jobs name it.")],
    value: Annotated[int, typer.Argument(metavar="VALUE", help="Priority: higher preempts lower.")],
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Define a priority class, or give an existing one a new value."""
    with scheduler(address) as stub:
        _set_class(stub, name, value)


@classes_app.command("delete")
def classes_delete(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Class name.")],
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Delete a priority class no pending or running job names."""
    with scheduler(address) as stub:
        request = pb.DeletePriorityClassRequest(name=name, request_id=_request_id())
        deleted = stub.DeletePriorityClass(request, timeout=UNARY_TIMEOUT_S)
    stdout.print(f"priority class {deleted.name} deleted")
