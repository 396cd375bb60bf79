"""`suanli network` and `suanli route resolve`: the Routing gRPC API from the shell.

Failures are one line and an exit code, as for the scheduler commands (3 refused, 4 unreachable); answers
in the CLI's one output style (`suanli.cli.output`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from suanli.cli import config
from suanli.cli.client import EXIT_USAGE, Failure, fail, rpc_failure
from suanli.cli.output import (
    TABLE,
    Format,
    NoHeadersOption,
    OutputOption,
    Rows,
    SortByOption,
    emit_rows,
    note,
)

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


_STATUS_STYLE = {2: "yellow", 3: "red"}
_LINK_NUMBERS = frozenset({"rtt_ms", "jitter_p95_ms", "loss", "gbps", "baseline_ms", "rounds"})
LINK_COLUMNS = (
    "from",
    "to",
    "status",
    "rtt_ms",
    "jitter_p95_ms",
    "loss",
    "gbps",
    "reason",
    "scope",
    "baseline_ms",
    "rounds",
    "last_probe",
)


def _cell(link: Any) -> Text:
    if link is None:
        return Text("-")
    text = f"{link.rtt_ms:.1f} ms {link.loss_ratio:.1%} {STATUS[link.status]}"
    return Text(text, style=_STATUS_STYLE.get(link.status, ""))


def matrix_rows(matrix: Any) -> Rows:
    """The region pairs as a matrix for people: one row per source region, one column per destination."""
    by_pair = {(link.src_region, link.dst_region): link for link in matrix.region_links}
    regions = list(matrix.regions)
    return Rows(
        ("from", *regions),
        [(src, *(_cell(by_pair.get((src, dst))) for dst in regions)) for src in regions],
        title="network: RTT / loss / status, rows = from, columns = to",
        right=frozenset(regions),
        headings=("FROM \\ TO", *regions),
    )


def _end(region: str, site: str) -> str:
    return f"{region}/{site}" if site else region


def links_rows(links: Sequence[Any], title: str = "") -> Rows:
    """One row per link (a region pair or a site path): what scripts get, and `-o wide` or --sort-by."""
    from suanli.cli.render import timestamp, to_data

    return Rows(
        LINK_COLUMNS,
        [
            (
                _end(link.src_region, link.src_site),
                _end(link.dst_region, link.dst_site),
                Text(STATUS[link.status], style=_STATUS_STYLE.get(link.status, "")),
                f"{link.rtt_ms:.1f}",
                f"{link.jitter_p95_ms:.1f}",
                f"{link.loss_ratio:.1%}",
                f"{link.bandwidth_mbps / 1000:.2f}" if link.bandwidth_mbps else "-",
                link.reason,
                link.scope,
                f"{link.baseline_rtt_ms:.1f}",
                str(link.rounds),
                timestamp(link.last_probe_at),
            )
            for link in links
        ],
        title=title,
        right=_LINK_NUMBERS,
        wide=frozenset({"scope", "baseline_ms", "rounds", "last_probe"}),
        kind="link",
        names=[link.link_id for link in links],
        items=[to_data(link) for link in links],
        key="links",
        wrap=frozenset({"reason"}),
    )


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
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    routing: Addr = DEFAULT_ADDR,
) -> None:
    """The network view: region RTT / loss / status matrix (and site paths with --sites).

    -o wide, --sort-by and the forms for scripts list one row per link (region pairs, then site paths).
    """
    from suanli.api.routing.v1 import routing_pb2 as pb

    with _routing(routing) as stub:
        matrix = stub.GetNetwork(pb.GetNetworkRequest(sites=sites), timeout=TIMEOUT_S)
    listed = links_rows([*matrix.region_links, *matrix.site_links])
    data = {"regions": list(matrix.regions), "links": list(listed.items)}
    if output.format is Format.TABLE and not sort_by:
        # A matrix reads at a glance, but has no rows to sort and no columns to widen.
        more = [links_rows(matrix.site_links, "site paths")] if sites else []
        emit_rows(output, data, matrix_rows(matrix), no_headers=no_headers, more=more)
    else:
        emit_rows(output, data, listed, no_headers=no_headers, sort_by=sort_by)
    if png is not None:
        heat_map(matrix, png)
        note(f"wrote {png}")


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
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
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
    from suanli.cli.render import to_data

    data = to_data(answer)
    more = [exclusions_rows(answer)] if answer.excluded else []
    rows = candidates_rows(answer, from_region, data["candidates"])
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by, more=more)


_CANDIDATE_NUMBERS = ("score", "compute", "network", "price", "free_cu", "rtt_ms", "per_hour")
_CANDIDATE_WIDE = ("gpu_model", "total_cu", "loss", "gbps", "link")
CANDIDATE_COLUMNS = ("rank", "region", "site", "device", *_CANDIDATE_NUMBERS, "currency", *_CANDIDATE_WIDE)


def candidates_rows(answer: Any, origin: str, items: Sequence[Any]) -> Rows:
    """Ranked candidates with the score per component; `items` are their data, in the answer's order."""
    rows = []
    for rank, c in enumerate(answer.candidates, start=1):
        s = c.score
        rows.append(
            (
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
                f"{c.price_per_hour:.4f}",
                c.currency,
                c.gpu_model,
                f"{c.total_cu:.0f}",
                f"{c.loss_ratio:.1%}",
                f"{c.bandwidth_mbps / 1000:.2f}" if c.bandwidth_mbps else "-",
                STATUS[c.link_status],
            )
        )
    return Rows(
        CANDIDATE_COLUMNS,
        rows,
        title=f"candidates from {origin}, best first",
        right=frozenset({"rank", *_CANDIDATE_NUMBERS, "total_cu", "loss", "gbps"}),
        wide=frozenset(_CANDIDATE_WIDE),
        kind="pool",
        names=[f"{c.region}/{c.site}/{c.device_class}" for c in answer.candidates],
        items=items,
        key="candidates",
    )


def exclusions_rows(answer: Any) -> Rows:
    """Why the other pools cannot take the workload: for people; scripts read `excluded` in the data."""
    return Rows(
        ("region", "site", "device", "code", "pools", "reason"),
        [
            (
                e.region,
                e.site or "(all)",
                e.device_class,
                EXCLUSION.get(e.code, str(e.code)),
                str(e.count),
                e.reason,
            )
            for e in answer.excluded
        ],
        title=f"excluded: {answer.excluded_total} pool(s), {len(answer.excluded)} listed",
        right=frozenset({"pools"}),
        wrap=frozenset({"reason"}),
    )
