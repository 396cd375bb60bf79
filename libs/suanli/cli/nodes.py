"""`suanli nodes`: the scheduler's view of the fleet (capacity, free resources, GPUs)."""

from __future__ import annotations

from typing import Annotated

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
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
    found: list[pb.Node] = []
    token = ""
    with scheduler(address) as stub:
        while True:
            page = stub.ListNodes(
                pb.ListNodesRequest(region=region, page_size=PAGE_SIZE, page_token=token),
                timeout=UNARY_TIMEOUT_S,
            )
            found.extend(page.nodes)
            token = page.next_page_token
            if not token:
                break
    emit(output, {"nodes": [to_data(n) for n in found]}, nodes_table(found))
