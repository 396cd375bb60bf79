"""`suanli queues [NAME]`: quota use per flavour against guaranteed and maximum, borrowing, fair share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli import paging
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, scheduler
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.cli.render import queues_rows, to_data
from suanli.cli.selectors import in_subtree
from suanli.cli.watching import IntervalOption, WatchOption, watch

if TYPE_CHECKING:
    from suanli.api.scheduler.v1.scheduler_pb2_grpc import SchedulerStub

PAGE_SIZE = 500


def all_queues(stub: SchedulerStub) -> list[pb.Queue]:
    """Every queue the caller sees, page after page, in name order."""

    def fetch(size: int, token: str) -> tuple[Sequence[pb.Queue], str]:
        request = pb.ListQueuesRequest(page_size=size, page_token=token)
        page = stub.ListQueues(request, timeout=UNARY_TIMEOUT_S)
        return page.queues, page.next_page_token

    return paging.collect(fetch, page_size=PAGE_SIZE)[0]


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
                found = all_queues(stub)
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
