"""`suanli queues [NAME]`: quota use per flavour against guaranteed and maximum, borrowing, fair share."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, scheduler
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.cli.render import queues_rows, to_data
from suanli.cli.selectors import in_subtree
from suanli.cli.watching import IntervalOption, WatchOption, watch


def queues(
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="One queue, e.g. acme/vision.")] = None,
    subtree: Annotated[
        bool, typer.Option("--subtree", help="NAME and every queue below it (acme: acme/vision, ...).")
    ] = False,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    watch_rows: WatchOption = False,
    interval: IntervalOption = 2.0,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List queues, or show one.

    With --subtree, NAME and every queue below it; with --watch, each queue's rows again as they change.
    """
    if subtree and not name:
        raise typer.BadParameter("--subtree needs NAME", param_hint="--subtree")
    one = bool(name) and not subtree
    with scheduler(address) as stub:

        def answer() -> tuple[dict[str, Any], Rows]:
            if one:
                found = [stub.GetQueue(pb.GetQueueRequest(name=name or ""), timeout=UNARY_TIMEOUT_S)]
            else:
                found = list(stub.ListQueues(pb.ListQueuesRequest(), timeout=UNARY_TIMEOUT_S).queues)
            if subtree and name:
                below = in_subtree(name)
                found = [q for q in found if below(q.name)]
            data = to_data(found[0]) if one else {"queues": [to_data(q) for q in found]}
            return data, queues_rows(found)

        if watch_rows:
            watch(answer, output, interval_s=interval, no_headers=no_headers, sort_by=sort_by)
            return
        data, rows = answer()
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)
