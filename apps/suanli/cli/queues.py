"""`suanli queues [NAME]`: quota use per flavour against guaranteed and maximum, borrowing, fair share."""

from __future__ import annotations

from typing import Annotated

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, scheduler
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, SortByOption, emit_rows
from suanli.cli.render import queues_rows, to_data
from suanli.cli.selectors import in_subtree


def queues(
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="One queue, e.g. acme/vision.")] = None,
    subtree: Annotated[
        bool, typer.Option("--subtree", help="NAME and every queue below it (acme: acme/vision, ...).")
    ] = False,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List queues, or show one.

    With --subtree, NAME and every queue below it.
    """
    if subtree and not name:
        raise typer.BadParameter("--subtree needs NAME", param_hint="--subtree")
    with scheduler(address) as stub:
        if name and not subtree:
            found = [stub.GetQueue(pb.GetQueueRequest(name=name), timeout=UNARY_TIMEOUT_S)]
        else:
            found = list(stub.ListQueues(pb.ListQueuesRequest(), timeout=UNARY_TIMEOUT_S).queues)
    if subtree and name:
        below = in_subtree(name)
        found = [q for q in found if below(q.name)]
    data = to_data(found[0]) if name and not subtree else {"queues": [to_data(q) for q in found]}
    emit_rows(output, data, queues_rows(found), no_headers=no_headers, sort_by=sort_by)
