"""`suanli agent`: the sensing agent of this machine, or a simulated fleet (`--simulate FLEET.yaml`).

The sensing service's command line, mounted by the root `suanli` CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.bus import no_auto_create
from suanli.sensing.entrypoints.settings import GROUP_PREFIX, SensingSettings

if TYPE_CHECKING:
    from suanli.sensing.entrypoints.logs_server import LogsEndpoint
    from suanli.sensing.entrypoints.runtime import RunSettings
    from suanli.sensing.service_layer.host import AgentHost
    from suanli.sensing.service_layer.ports import EventSink

app = typer.Typer(help="Sensing: the node agent and simulated fleets.", no_args_is_help=True)
# An option's help from its setting, so the default and the variable are written once.
_help = SensingSettings.describe
Build = Callable[["EventSink"], "AgentHost"]


# Options default to None ("not given"): SensingSettings holds every default and reads the environment.
@app.command("agent")
def agent(
    simulate: Annotated[
        Path | None,
        typer.Option(
            "--simulate",
            exists=True,
            dir_okay=False,
            help="Fleet YAML: run one simulated agent per node in it (see deploy/fleets/).",
        ),
    ] = None,
    node_id: Annotated[str | None, typer.Option("--node-id", help=_help("node_id"))] = None,
    region: Annotated[str | None, typer.Option(help=_help("region"))] = None,
    zone: Annotated[str | None, typer.Option(help=_help("zone"))] = None,
    site: Annotated[str | None, typer.Option(help=_help("site"))] = None,
    labels: Annotated[
        list[str] | None, typer.Option("--label", help="Repeatable. " + _help("labels"))
    ] = None,
    interval_s: Annotated[float | None, typer.Option("--interval", help=_help("interval_s"))] = None,
    peers: Annotated[
        list[str] | None,
        typer.Option("--peer", help="Repeatable. " + _help("peers")),
    ] = None,
    probe_port: Annotated[int | None, typer.Option("--probe-port", help=_help("probe_port"))] = None,
    probe_interval_s: Annotated[
        float | None,
        typer.Option("--probe-interval", help=_help("probe_interval_s")),
    ] = None,
    bandwidth_every: Annotated[
        int | None, typer.Option("--bandwidth-every", help=_help("bandwidth_every"))
    ] = None,
    bandwidth_mib: Annotated[
        float | None, typer.Option("--bandwidth-mib", help=_help("bandwidth_mib"))
    ] = None,
    faults_path: Annotated[
        Path | None, typer.Option("--faults", dir_okay=False, help=_help("faults_path"))
    ] = None,
    grace_s: Annotated[
        float | None,
        typer.Option("--grace", help=_help("grace_s")),
    ] = None,
    sim_duration_s: Annotated[
        float | None,
        typer.Option("--sim-duration", help=_help("sim_duration_s")),
    ] = None,
    task_log_dir: Annotated[Path | None, typer.Option("--task-log-dir", help=_help("task_log_dir"))] = None,
    logs_listen: Annotated[str | None, typer.Option("--logs-listen", help=_help("logs_listen"))] = None,
    logs_advertise: Annotated[
        str | None, typer.Option("--logs-advertise", help=_help("logs_advertise"))
    ] = None,
    replica_host: Annotated[str | None, typer.Option("--replica-host", help=_help("replica_host"))] = None,
    run_as: Annotated[list[str] | None, typer.Option("--run-as", help=_help("run_as"))] = None,
    cgroup_parent: Annotated[
        Path | None, typer.Option("--cgroup-parent", file_okay=False, help=_help("cgroup_parent"))
    ] = None,
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", help=_help("bootstrap")),
    ] = None,
    topic_prefix: Annotated[str | None, typer.Option("--topic-prefix", help=_help("topic_prefix"))] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", help=_help("metrics_port"))] = None,
    once: Annotated[
        bool,
        typer.Option("--once", help="Print NodeRegistered and the first NodeSnapshot as JSON; no broker."),
    ] = False,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Report this node (or a simulated fleet) to Suanli and run the tasks placed on it."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Imported here so `suanli --help` stays fast and other commands never load the agent.
    from suanli.sensing.adapters.faults_file import load_faults
    from suanli.sensing.adapters.fleet_file import load_fleet
    from suanli.sensing.adapters.nvml import NvmlUnavailable
    from suanli.sensing.bootstrap import RealAgentConfig, build_fleet_host, build_real_agent
    from suanli.sensing.domain.faults import FaultError
    from suanli.sensing.domain.fleet import FleetError
    from suanli.sensing.entrypoints.runtime import RunSettings
    from suanli.settings import SettingsError

    try:
        settings = SensingSettings.load(
            bootstrap=bootstrap,
            topic_prefix=topic_prefix,
            node_id=node_id,
            region=region,
            zone=zone,
            site=site,
            labels=labels,
            interval_s=interval_s,
            peers=peers,
            probe_port=probe_port,
            probe_interval_s=probe_interval_s,
            bandwidth_every=bandwidth_every,
            bandwidth_mib=bandwidth_mib,
            faults_path=faults_path,
            grace_s=grace_s,
            sim_duration_s=sim_duration_s,
            task_log_dir=task_log_dir,
            logs_listen=logs_listen,
            logs_advertise=logs_advertise,
            replica_host=replica_host,
            run_as=run_as,
            cgroup_parent=cgroup_parent,
            metrics_port=metrics_port,
        )
        fleet = load_fleet(simulate) if simulate else None
        faults_file = settings.faults_path
        if faults_file is not None:
            if fleet is None:
                raise FaultError("--faults scripts a simulated fleet: it needs --simulate")
            load_faults(faults_file, fleet)  # a bad file at start is a usage error; later, only logged
        endpoint = _logs_endpoint(settings, fleet is not None)
    except (SettingsError, FleetError, FaultError) as exc:
        raise typer.BadParameter(str(exc)) from exc

    build: Build
    if fleet is not None:
        spec = fleet

        def build(sink: EventSink) -> AgentHost:
            return build_fleet_host(
                spec,
                sink,
                interval_s=settings.interval_s,
                default_duration_s=settings.sim_duration_s,
                replica_interval_s=settings.replica_interval_s,
                faults_path=faults_file,
            )

        group = f"{GROUP_PREFIX}fleet-{fleet.name}"
        typer.echo(f"simulating {len(fleet.nodes)} nodes in {len(fleet.regions)} regions ({fleet.name})")
    else:
        try:
            identity = settings.identity(socket.gethostname())
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        config = RealAgentConfig(
            identity,
            settings.interval_s,
            settings.grace_s,
            settings.peers,
            bandwidth_every=settings.bandwidth_every,
            bandwidth_bytes=round(settings.bandwidth_mib * 1024 * 1024),
            log_dir=settings.task_log_dir,
            confinement=settings.confinement(),
            replica_host=settings.replica_host or "",
            replica_interval_s=settings.replica_interval_s,
        )

        serving = endpoint

        def build(sink: EventSink) -> AgentHost:
            address = serving.address if serving is not None else ""
            real = build_real_agent(replace(config, logs_endpoint=address), sink)
            if isinstance(real.gpu, NvmlUnavailable):
                typer.echo(f"no GPUs: {real.gpu.reason}; reporting the host only", err=True)
            if serving is not None:
                serving.bind(next(iter(real.host.agents.values())))
            return real.host

        group = f"{GROUP_PREFIX}agent-{identity.node_id}"

    if once:
        asyncio.run(_print_once(build))
        return
    run = RunSettings(
        bootstrap=settings.bootstrap,
        group_id=group,
        prefix=settings.topic_prefix,
        interval_s=settings.interval_s,
        probe_interval_s=settings.probe_interval_s,
        self_fence_s=settings.self_fence_s,
        topic_check_s=settings.topic_check_s,
    )
    no_auto_create.install()  # the agent never recreates a topic a restarted broker lost (see the module)
    asyncio.run(_serve(run, build, settings.probe_port, settings.metrics_port, endpoint))


def _logs_endpoint(settings: SensingSettings, simulated: bool) -> LogsEndpoint | None:
    """The task-logs endpoint the settings ask for (None: not served); a usage error when it cannot be."""
    if not settings.logs_listen:
        return None
    if simulated:
        raise typer.BadParameter("--logs-listen serves real tasks' logs: a simulated fleet runs no processes")
    if settings.task_log_dir is None:
        raise typer.BadParameter("--logs-listen serves the logs --task-log-dir keeps: give both")
    from suanli.sensing.adapters.task_logs import TaskLogs
    from suanli.sensing.entrypoints.logs_server import LogsEndpoint

    # The node id as `settings.identity` makes it.
    logs = TaskLogs(settings.task_log_dir, settings.node_id or socket.gethostname())
    return LogsEndpoint(logs, settings.logs_listen, settings, settings.logs_advertise)


class _PrintSink:
    """Collects events for printing; encodes each so --once also proves they match the contracts."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        from suanli import contracts

        contracts.encode(event_name, record)
        self.events.append((event_name, record))


async def _print_once(build: Build) -> None:
    sink = _PrintSink()
    host = build(sink)
    await host.register_all()
    await host.report_all()
    for name, record in sink.events[:2] if len(host.agents) > 1 else sink.events:
        typer.echo(json.dumps({"event": name, "record": record}, default=str, indent=2))
    if len(host.agents) > 1:
        typer.echo(f"... and {len(sink.events) - 2} more events for {len(host.agents)} nodes")


async def _serve(
    settings: RunSettings,
    build: Build,
    probe_port: int,
    metrics_port: int | None,
    logs: LogsEndpoint | None = None,
) -> None:
    from suanli.sensing.adapters.probes import start_probe_listener
    from suanli.sensing.entrypoints.runtime import serve
    from suanli.telemetry import setup

    telemetry = setup("sensing", metrics_port=metrics_port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await start_probe_listener("0.0.0.0", probe_port) if probe_port else None
    try:
        # The logs endpoint first: its address is one of the labels the node registers with.
        async with logs.serving() if logs is not None else contextlib.nullcontext():
            await serve(settings, build, stop)
    finally:
        if server is not None:
            server.close()
        telemetry.shutdown()
