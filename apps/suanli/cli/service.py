"""`suanli service create|get|list|scale|delete|watch|explain|drive`: inference services through the
Serving gRPC API.

The spec is checked by the service (its errors name the field: `spec.resources.gpu: ...`); answers use
the CLI's one output style (`-o table|wide|name|json|yaml|csv|jsonpath=`, `--no-headers`, `--sort-by`)
and its exit codes (2 usage, 3 refused, 4 unreachable).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.cli import config, paging, watching
from suanli.cli.client import EXIT_USAGE, Failure, fail, rpc_failure
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.cli.render import to_data
from suanli.cli.watching import IntervalOption, WatchOption

if TYPE_CHECKING:
    from suanli.api.serving.v1 import serving_pb2_grpc

ADDR_ENV = "SUANLI_SERVING_ADDR"
BUILTIN_ADDR = "localhost:50056"
TIMEOUT_S = 30.0
PAGE_SIZE = 500
TOKEN_TENANT = "the token's tenant"

app = typer.Typer(
    help="Create, scale, watch, explain and delete inference services. A service is a model server kept at "
    "between min_replicas and max_replicas replicas, each an inference job of the scheduler "
    "(docs/serving.md).",
    no_args_is_help=True,
)

Addr = Annotated[
    str,
    typer.Option(
        "--serving",
        envvar=ADDR_ENV,
        metavar="HOST:PORT",
        show_default=False,
        help=f"Serving gRPC address (env {ADDR_ENV}; default: the config context's, else {BUILTIN_ADDR}).",
    ),
]
Tenant = Annotated[
    str, typer.Option("--tenant", "-t", show_default=False, help=f"Tenant (default: {TOKEN_TENANT}).")
]
Name = Annotated[str, typer.Argument(help="The service's name.", show_default=False)]


def _stub(addr: str) -> tuple[Any, serving_pb2_grpc.ServingStub]:
    from suanli.api.serving.v1 import serving_pb2_grpc

    channel = config.channel(addr)
    return channel, serving_pb2_grpc.ServingStub(channel)


def _connect(addr: str) -> tuple[str, Any, serving_pb2_grpc.ServingStub]:
    try:
        addr = config.server("serving", addr, BUILTIN_ADDR)
        return (addr, *_stub(addr))
    except config.ConfigError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None


@contextmanager
def _serving(addr: str) -> Iterator[serving_pb2_grpc.ServingStub]:
    """A stub on a fresh channel, gRPC errors reported as the serving service's; closed at the end."""
    import grpc

    addr, channel, stub = _connect(addr)
    try:
        yield stub
    except grpc.RpcError as exc:
        raise fail(rpc_failure(exc, addr, service="serving")) from None
    finally:
        channel.close()


def _call(addr: str, method: str, request: Any) -> Any:
    with _serving(addr) as stub:
        return getattr(stub, method)(request, timeout=TIMEOUT_S)


_COLUMNS = ("name", "tenant", "model", "state", "desired", "placed", "min", "max", "service_id")
_REPLICA_COLUMNS = (
    "replica",
    "state",
    "guaranteed",
    "job_id",
    "node",
    "region",
    "pinned",
    "attempt",
    "in_flight",
    "queued",
    "latency_s",
)


def _service_rows(services: list[Any]) -> Rows:
    return Rows(
        _COLUMNS,
        [
            (
                s.name,
                s.tenant,
                s.model,
                s.state,
                str(s.desired_replicas),
                str(s.placed_replicas),
                str(s.min_replicas),
                str(s.max_replicas),
                s.service_id,
            )
            for s in services
        ],
        right=frozenset({"desired", "placed", "min", "max"}),
        wide=frozenset({"service_id"}),
        kind="service",
        items=[to_data(s) for s in services],
        key="services",
    )


def _emit_service(answer: Any, output: Any, no_headers: bool, sort_by: str) -> None:
    rows = Rows(
        _REPLICA_COLUMNS,
        [
            (
                r.replica_id,
                r.state,
                "yes" if r.guaranteed else "",
                r.job_id,
                r.node_id,
                r.region,
                r.pinned_region,
                str(r.attempt or ""),
                *_load_cells(r),
            )
            for r in answer.replicas
        ],
        f"service {answer.tenant}/{answer.name} ({answer.model}, {answer.state}): "
        f"{answer.placed_replicas} of {answer.desired_replicas} replicas placed, "
        f"min {answer.min_replicas}, max {answer.max_replicas}",
        right=frozenset({"attempt", "in_flight", "queued", "latency_s"}),
        wide=frozenset({"pinned", "attempt"}),
        kind="service",
        names=[answer.name],
    )
    emit_rows(output, to_data(answer), rows, no_headers=no_headers, sort_by=sort_by)


def _load_cells(replica: Any) -> tuple[str, str, str]:
    # Blank while the replica sends no fresh load report (services.load).
    if not replica.HasField("load"):
        return ("", "", "")
    load = replica.load
    return (str(load.in_flight), str(load.queued), f"{load.recent_latency_s:.3f}")


def _spec_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(Failure(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE)) from None


@app.command()
def create(
    file: Annotated[
        str,
        typer.Option(
            "--file", "-f", show_default=False, help="The service spec (YAML or JSON); - reads stdin."
        ),
    ],
    queue: Annotated[
        str,
        typer.Option(
            "--queue", "-q", show_default=False, help="Queue of the replicas (default: the spec's)."
        ),
    ] = "",
    replicas: Annotated[
        int, typer.Option("--replicas", min=0, help="Replicas to start with (0: min_replicas).")
    ] = 0,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    serving: Addr = "",
) -> None:
    """Create a service from its spec and request its first replicas from the scheduler."""
    from suanli.api.serving.v1 import serving_pb2 as pb

    request = pb.CreateServiceRequest(spec=_spec_text(file), queue=queue, replicas=replicas)
    _emit_service(_call(serving, "CreateService", request), output, no_headers, "")


@app.command()
def get(
    name: Name,
    tenant: Tenant = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    serving: Addr = "",
) -> None:
    """A service and its replicas: state, job, node and region of each."""
    from suanli.api.serving.v1 import serving_pb2 as pb

    answer = _call(serving, "GetService", pb.GetServiceRequest(tenant=tenant, name=name))
    _emit_service(answer, output, no_headers, sort_by)


@app.command("list")
def list_services(
    tenant: Tenant = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    watch_rows: WatchOption = False,
    interval: IntervalOption = 2.0,
    serving: Addr = "",
) -> None:
    """The tenant's services (a platform-wide token without --tenant: every tenant's), all pages.

    With --watch, each service again as it appears or changes (replica counts, state), until Ctrl-C.
    """
    from suanli.api.serving.v1 import serving_pb2 as pb

    with _serving(serving) as stub:

        def fetch(size: int, token: str) -> tuple[Sequence[Any], str]:
            request = pb.ListServicesRequest(tenant=tenant, page_size=size, page_token=token)
            page = stub.ListServices(request, timeout=TIMEOUT_S)
            return page.services, page.next_page_token

        def answer() -> tuple[dict[str, Any], Rows]:
            rows = _service_rows(paging.collect(fetch, page_size=PAGE_SIZE)[0])
            return {"services": list(rows.items)}, rows

        if watch_rows:
            watching.watch(answer, output, interval_s=interval, no_headers=no_headers, sort_by=sort_by)
            return
        data, rows = answer()
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)


@app.command()
def scale(
    name: Name,
    replicas: Annotated[int, typer.Option("--replicas", "-r", help="The desired replica count.")],
    tenant: Tenant = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    serving: Addr = "",
) -> None:
    """Set the desired replica count (min_replicas..max_replicas; outside it: refused, exit 3)."""
    from suanli.api.serving.v1 import serving_pb2 as pb

    request = pb.ScaleServiceRequest(tenant=tenant, name=name, replicas=replicas)
    _emit_service(_call(serving, "ScaleService", request), output, no_headers, "")


@app.command()
def delete(
    name: Name,
    tenant: Tenant = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    serving: Addr = "",
) -> None:
    """Delete a service: its replicas are released and their jobs cancelled."""
    from suanli.api.serving.v1 import serving_pb2 as pb

    request = pb.DeleteServiceRequest(tenant=tenant, name=name)
    _emit_service(_call(serving, "DeleteService", request), output, no_headers, "")


@app.command()
def watch(name: Name, tenant: Tenant = "", serving: Addr = "") -> None:
    """Follow a service: a line now and after each change, until it is deleted and its replicas gone."""
    from suanli.api.serving.v1 import serving_pb2 as pb

    with _serving(serving) as stub:
        for update in stub.WatchService(pb.WatchServiceRequest(tenant=tenant, name=name)):
            s = update.service
            states = ", ".join(f"{r.replica_id} {r.state}" for r in s.replicas) or "no replicas"
            typer.echo(
                f"{update.event:<8} {s.tenant}/{s.name} {s.state}: {s.placed_replicas}/{s.desired_replicas}"
                f" placed ({states})"
            )


@app.command()
def drive(
    name: Name,
    gateway: Annotated[
        str,
        typer.Option(
            "--gateway",
            metavar="URL",
            help="The request gateway (`suanli gateway`), e.g. http://127.0.0.1:8090.",
        ),
    ],
    speed: Annotated[
        float, typer.Option("--speed", help="Replay this many times as fast as the trace's arrivals.")
    ] = 1.0,
    start: Annotated[
        float, typer.Option("--start", metavar="SECONDS", help="Begin this far into the trace.")
    ] = 0.0,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, show_default=False, help="Send at most this many requests."),
    ] = None,
    max_in_flight: Annotated[
        int,
        typer.Option("--max-in-flight", min=1, help="Outstanding requests at most; an arrival beyond fails."),
    ] = 256,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one request may take.")] = 120.0,
    ttft_ms: Annotated[
        float, typer.Option("--ttft-ms", show_default=False, help="The SLO's TTFT (default: the spec's).")
    ] = 0.0,
    tpot_ms: Annotated[
        float, typer.Option("--tpot-ms", show_default=False, help="The SLO's TPOT (default: the spec's).")
    ] = 0.0,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace", show_default=False, help="Another trace in the Azure format (default: conv)."
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", show_default=False, help="Also write the figures here.")
    ] = None,
    tenant: Tenant = "",
    serving: Addr = "",
) -> None:
    """Replay the Azure LLM trace against a service through a gateway; report SLO attainment and latency.

    Requests are sent at the trace's arrival times (open loop) with its context and generated tokens;
    failures (404/503 no replica, 502, timeouts) count against attainment.
    """
    import asyncio

    from suanli.api.serving.v1 import serving_pb2 as pb
    from suanli.inference.drive import DriveConfig
    from suanli.inference.drive_cli import load_window, report, run_drive, slo_of

    service = _call(serving, "GetService", pb.GetServiceRequest(tenant=tenant, name=name))
    try:
        target = slo_of(service.spec, ttft_ms, tpot_ms)
        replay = load_window(trace, start, limit, speed)
    except ValueError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    cfg = DriveConfig(gateway, service.service_id, max_in_flight, timeout)
    typer.echo(f"replaying {len(replay)} requests to {cfg.url} at {speed:g}x", err=True)
    report(asyncio.run(run_drive(replay, cfg, target)), json_path)


_DECISION_COLUMNS = (
    "decided_at",
    "autoscaler",
    "replicas",
    "reason",
    "ready",
    "starting",
    "concurrency",
    "queued",
    "arrivals_per_s",
    "model",
)


def _figure(value: float) -> str:
    return f"{value:.3g}"


@app.command()
def explain(
    name: Name,
    tenant: Tenant = "",
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1000, help="Decisions to show, newest first.")
    ] = 20,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    serving: Addr = "",
) -> None:
    """The autoscaler's last decisions: what it saw, its model's figures, the count it chose and why.

    Shown: each decision that changed the replica count, and the latest that held it (docs/serving.md).
    """
    from suanli.api.serving.v1 import serving_pb2 as pb

    request = pb.ExplainServiceRequest(tenant=tenant, name=name, limit=limit)
    answer = _call(serving, "ExplainService", request)
    rows = Rows(
        _DECISION_COLUMNS,
        [
            (
                d.decided_at.ToDatetime().strftime("%Y-%m-%dT%H:%M:%SZ"),
                d.autoscaler,
                f"{d.from_replicas} -> {d.to_replicas}" if d.changed else f"{d.to_replicas} (held)",
                d.reason,
                str(d.inputs.ready),
                str(d.inputs.starting),
                _figure(d.inputs.concurrency),
                str(d.inputs.queued),
                _figure(d.inputs.arrivals / d.inputs.interval_s if d.inputs.interval_s else 0.0),
                ", ".join(f"{f.name}={_figure(f.value)}" for f in d.model),
            )
            for d in answer.decisions
        ],
        f"service {answer.tenant}/{answer.name}: autoscaling {answer.policy}, "
        f"{answer.desired_replicas} replicas desired"
        + ("" if answer.policy != "none" else " (set by hand: no autoscaler decides)"),
        right=frozenset({"ready", "starting", "concurrency", "queued", "arrivals_per_s"}),
        wide=frozenset({"model"}),
        wrap=frozenset({"reason", "model"}),
        kind="decision",
        names=[d.decided_at.ToJsonString() for d in answer.decisions],
    )
    emit_rows(output, to_data(answer), rows, no_headers=no_headers)
