"""`suanli network` and `suanli route resolve`: the Routing gRPC API from the shell.

Failures are one line and an exit code, as for the scheduler commands (3 refused, 4 unreachable).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from suanli.cli import config
from suanli.cli.client import EXIT_USAGE, Failure, fail, rpc_failure

if TYPE_CHECKING:
    from suanli.api.routing.v1 import routing_pb2_grpc

ADDR_ENV = "SUANLI_ROUTING_ADDR"
BUILTIN_ADDR = "127.0.0.1:50053"
DEFAULT_ADDR = ""  # not given: the config context's routing address, else BUILTIN_ADDR
TIMEOUT_S = 30.0
STATUS = {0: "UNKNOWN", 1: "OK", 2: "DEGRADED", 3: "DOWN"}
EXCLUSION = {
    1: "LINK_DOWN",
    2: "NO_PATH",
    3: "RTT",
    4: "BANDWIDTH",
    5: "GPU_MODEL",
    6: "CAPACITY",
    7: "NO_PRICE",
    8: "PRICE",
}

Addr = Annotated[
    str,
    typer.Option(
        "--routing",
        envvar=ADDR_ENV,
        metavar="HOST:PORT",
        show_default=False,
        help=f"Routing gRPC address (env {ADDR_ENV}; default: the config context's, else {BUILTIN_ADDR}).",
    ),
]

route_app = typer.Typer(help="Ask the routing service where a workload should go.", no_args_is_help=True)


@contextmanager
def _routing(addr: str) -> Iterator[routing_pb2_grpc.RoutingStub]:
    import grpc

    from suanli.api.routing.v1 import routing_pb2_grpc

    try:
        addr = config.server("routing", addr, BUILTIN_ADDR)
        channel = config.channel(addr)
    except config.ConfigError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    with channel:
        try:
            yield routing_pb2_grpc.RoutingStub(channel)
        except grpc.RpcError as exc:
            raise fail(rpc_failure(exc, addr, service="routing")) from None


def _cell(link: Any) -> str:
    if link is None:
        return "-"
    return f"{link.rtt_ms:.1f} ms {link.loss_ratio:.1%} {STATUS[link.status]}"


def region_table(matrix: Any) -> Table:
    by_pair = {(link.src_region, link.dst_region): link for link in matrix.region_links}
    table = Table(title="network: RTT / loss / status, rows = from, columns = to")
    table.add_column("from \\ to")
    for region in matrix.regions:
        table.add_column(region, justify="right")
    for src in matrix.regions:
        table.add_row(src, *(_cell(by_pair.get((src, dst))) for dst in matrix.regions))
    return table


def site_table(matrix: Any) -> Table:
    table = Table(title="site paths")
    for name in ("from", "to", "rtt ms", "p95 jitter ms", "loss", "Gbps", "status", "reason"):
        table.add_column(
            name, justify="right" if name in {"rtt ms", "p95 jitter ms", "loss", "Gbps"} else "left"
        )
    for link in matrix.site_links:
        table.add_row(
            f"{link.src_region}/{link.src_site}",
            f"{link.dst_region}/{link.dst_site}",
            f"{link.rtt_ms:.1f}",
            f"{link.jitter_p95_ms:.1f}",
            f"{link.loss_ratio:.1%}",
            f"{link.bandwidth_mbps / 1000:.2f}" if link.bandwidth_mbps else "-",
            STATUS[link.status],
            link.reason,
        )
    return table


def heat_map(matrix: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    regions = list(matrix.regions)
    index = {r: i for i, r in enumerate(regions)}
    rtt = np.full((len(regions), len(regions)), np.nan)
    marks: dict[tuple[int, int], str] = {}
    for link in matrix.region_links:
        i, j = index[link.src_region], index[link.dst_region]
        rtt[i, j] = link.rtt_ms
        marks[(i, j)] = {2: "DEG", 3: "DOWN"}.get(link.status, f"{link.rtt_ms:.0f}")
    size = max(4.0, 0.8 * len(regions) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
    image = ax.imshow(rtt, cmap="viridis_r")
    ax.set_xticks(range(len(regions)), regions, rotation=45, ha="right")
    ax.set_yticks(range(len(regions)), regions)
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    for (i, j), text in marks.items():
        ax.text(j, i, text, ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(image, ax=ax, label="RTT (ms, EWMA)")
    ax.set_title("Suanli network view: region RTT")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def network(
    sites: Annotated[bool, typer.Option("--sites", help="Also list every site path.")] = False,
    png: Annotated[
        Path | None, typer.Option("--png", dir_okay=False, help="Also write a heat map PNG.")
    ] = None,
    routing: Addr = DEFAULT_ADDR,
) -> None:
    """The network view: region RTT / loss / status matrix (and site paths with --sites)."""
    from suanli.api.routing.v1 import routing_pb2 as pb

    with _routing(routing) as stub:
        matrix = stub.GetNetwork(pb.GetNetworkRequest(sites=sites), timeout=TIMEOUT_S)
    console = Console()
    console.print(region_table(matrix))
    if sites:
        console.print(site_table(matrix))
    if png is not None:
        heat_map(matrix, png)
        typer.echo(f"wrote {png}")


@route_app.command("resolve")
def resolve(
    from_region: Annotated[str, typer.Option("--from", help="Region of the clients or the data.")],
    max_rtt_ms: Annotated[float, typer.Option("--max-rtt-ms", min=0, help="RTT limit, ms (0: none).")] = 0.0,
    min_bandwidth_gbps: Annotated[
        float, typer.Option("--min-bandwidth-gbps", min=0, help="Bandwidth floor, Gbps (0: none).")
    ] = 0.0,
    gpu_model: Annotated[
        list[str] | None, typer.Option("--gpu-model", help="Acceptable GPU model (repeatable).")
    ] = None,
    cu: Annotated[float, typer.Option("--cu", min=0, help="Compute units needed.")] = 0.0,
    max_price: Annotated[
        float, typer.Option("--max-price", min=0, help="Price limit per hour (0: none).")
    ] = 0.0,
    kind: Annotated[str, typer.Option("--kind", help="training or inference.")] = "training",
    limit: Annotated[int, typer.Option("--limit", min=0, max=1000, help="Candidates to show (0: 10).")] = 0,
    routing: Addr = DEFAULT_ADDR,
) -> None:
    """Where a workload should go: ranked candidates with the score per component, and the exclusions."""
    from suanli.api.routing.v1 import routing_pb2 as pb

    kinds = {"training": pb.WORKLOAD_KIND_TRAINING, "inference": pb.WORKLOAD_KIND_INFERENCE}
    if kind not in kinds:
        raise typer.BadParameter(f"unknown kind {kind!r}; one of training, inference", param_hint="--kind")
    request = pb.ResolveRequest(
        kind=kinds[kind],
        from_region=from_region,
        max_rtt_ms=max_rtt_ms,
        min_bandwidth_gbps=min_bandwidth_gbps,
        gpu_models=gpu_model or [],
        cu=cu,
        max_price_per_hour=max_price,
        limit=limit,
    )
    with _routing(routing) as stub:
        answer = stub.Resolve(request, timeout=TIMEOUT_S)
    console = Console()
    console.print(candidates_table(answer, from_region))
    if answer.excluded:
        console.print(exclusions_table(answer))


def candidates_table(answer: Any, origin: str) -> Table:
    table = Table(title=f"candidates from {origin}, best first")
    numeric = ("score", "compute", "network", "price", "free CU", "rtt ms", "per hour")
    for name in ("#", "region", "site", "device", *numeric):
        table.add_column(name, justify="right" if name in (*numeric, "#") else "left")
    for rank, c in enumerate(answer.candidates, start=1):
        s = c.score
        table.add_row(
            str(rank),
            c.region,
            c.site,
            c.device_class,
            f"{s.total:.3f}",
            f"{s.compute:.3f}",
            f"{s.network:.3f}",
            f"{s.price:.3f}",
            f"{c.free_cu:.0f}",
            f"{c.rtt_ms:.1f}",
            f"{c.price_per_hour:.4f} {c.currency}",
        )
    return table


def exclusions_table(answer: Any) -> Table:
    shown = len(answer.excluded)
    table = Table(title=f"excluded: {answer.excluded_total} pool(s), {shown} listed")
    for name in ("region", "site", "device", "code", "reason"):
        table.add_column(name)
    for e in answer.excluded:
        table.add_row(
            e.region, e.site or "(all)", e.device_class, EXCLUSION.get(e.code, str(e.code)), e.reason
        )
    return table
