"""`suanli nodes`: the scheduler's view of the fleet (capacity, free resources, GPUs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli import paging
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, scheduler
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.cli.render import nodes_rows, to_data
from suanli.cli.selectors import Selector, SelectorOption
from suanli.cli.watching import IntervalOption, WatchOption, watch

PAGE_SIZE = 500


def nodes(
    region: Annotated[str, typer.Option("--region", "-r", help="Only nodes in this region.")] = "",
    selector: SelectorOption = None,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    watch_rows: WatchOption = False,
    interval: IntervalOption = 2.0,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List nodes with free/total CPU, memory and GPUs.

    With --watch, each node again as it changes.
    """
    labels = Selector.parse(selector)
    with scheduler(address) as stub:

        def fetch(size: int, token: str) -> tuple[Sequence[pb.Node], str]:
            request = pb.ListNodesRequest(region=region, page_size=size, page_token=token)
            page = stub.ListNodes(request, timeout=UNARY_TIMEOUT_S)
            return page.nodes, page.next_page_token

        def answer() -> tuple[dict[str, Any], Rows]:
            found, _ = paging.collect(fetch, page_size=PAGE_SIZE)
            found = [n for n in found if labels.matches(n.labels)]
            return {"nodes": [to_data(n) for n in found]}, nodes_rows(found)

        if watch_rows:
            watch(answer, output, interval_s=interval, no_headers=no_headers, sort_by=sort_by)
            return
        data, rows = answer()
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)
