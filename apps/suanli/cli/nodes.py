"""`suanli nodes`: the scheduler's view of the fleet (capacity, free resources, GPUs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli import paging
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, scheduler
from suanli.cli.output import OutputOption, emit
from suanli.cli.render import OutputFormat, nodes_table, to_data

PAGE_SIZE = 500


def nodes(
    region: Annotated[str, typer.Option("--region", "-r", help="Only nodes in this region.")] = "",
    output: OutputOption = OutputFormat.TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List nodes with free/total CPU, memory and GPUs."""
    with scheduler(address) as stub:

        def fetch(size: int, token: str) -> tuple[Sequence[pb.Node], str]:
            request = pb.ListNodesRequest(region=region, page_size=size, page_token=token)
            page = stub.ListNodes(request, timeout=UNARY_TIMEOUT_S)
            return page.nodes, page.next_page_token

        found, _ = paging.collect(fetch, page_size=PAGE_SIZE)
    emit(output, {"nodes": [to_data(n) for n in found]}, nodes_table(found))
