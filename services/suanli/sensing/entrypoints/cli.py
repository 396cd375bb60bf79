"""`suanli agent`: the sensing agent of this machine, or a simulated fleet (`--simulate FLEET.yaml`).

The sensing service's command line, mounted by the root `suanli` CLI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.bus.topics import TOPIC_PREFIX_ENV

if TYPE_CHECKING:
    from suanli.sensing.entrypoints.runtime import RunSettings
    from suanli.sensing.service_layer.host import AgentHost
    from suanli.sensing.service_layer.ports import EventSink

KAFKA_ENV = "SUANLI_KAFKA_BOOTSTRAP"

app = typer.Typer(help="Sensing: the node agent and simulated fleets.", no_args_is_help=True)
Build = Callable[["EventSink"], "AgentHost"]


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
    node_id: Annotated[str, typer.Option("--node-id", help="Node id (default: host name).")] = "",
    region: Annotated[str, typer.Option(help="Region of this node.")] = "local",
    zone: Annotated[str, typer.Option(help="Zone (default: <region>-a).")] = "",
    site: Annotated[str, typer.Option(help="Site / data centre (default: <region>-1).")] = "",
    label: Annotated[
        list[str] | None, typer.Option("--label", help="Node label KEY=VALUE (repeatable).")
    ] = None,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between snapshots.")] = 5.0,
    peer: Annotated[
        list[str] | None,
        typer.Option("--peer", help="Peer agent to probe, HOST:PORT[=REGION/SITE] (repeatable)."),
    ] = None,
    probe_port: Annotated[
        int, typer.Option("--probe-port", help="Accept peers' TCP probes on this port (0: off).")
    ] = 0,
    probe_interval: Annotated[
        float, typer.Option("--probe-interval", min=1.0, help="Seconds between probe rounds.")
    ] = 30.0,
    grace: Annotated[
        float, typer.Option("--grace", min=0.0, help="SIGTERM-to-SIGKILL grace when stopping tasks.")
    ] = 10.0,
    sim_duration: Annotated[
        float,
        typer.Option(
            "--sim-duration",
            min=0.0,
            help="Simulated task length when the placement's env has no SUANLI_SIM_DURATION_S.",
        ),
    ] = 300.0,
    log_dir: Annotated[
        Path | None, typer.Option("--task-log-dir", help="Write each task's output to a file here.")
    ] = None,
    bootstrap: Annotated[
        str, typer.Option("--bootstrap", envvar=KAFKA_ENV, help="Kafka bootstrap servers.")
    ] = "127.0.0.1:9092",
    topic_prefix: Annotated[
        str, typer.Option("--topic-prefix", envvar=TOPIC_PREFIX_ENV, help="Topic namespace.")
    ] = "",
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
    from suanli.sensing.adapters.fleet_file import load_fleet
    from suanli.sensing.adapters.nvml import NvmlUnavailable
    from suanli.sensing.adapters.probes import Peer
    from suanli.sensing.bootstrap import RealAgentConfig, build_fleet_host, build_real_agent
    from suanli.sensing.domain.fleet import FleetError
    from suanli.sensing.domain.identity import NodeIdentity
    from suanli.sensing.entrypoints.runtime import RunSettings

    try:
        labels = dict(_pair(text) for text in label or ())
        peers = [Peer.parse(text) for text in peer or ()]
        fleet = load_fleet(simulate) if simulate else None
    except (ValueError, FleetError) as exc:
        raise typer.BadParameter(str(exc)) from exc

    build: Build
    if fleet is not None:
        spec = fleet

        def build(sink: EventSink) -> AgentHost:
            return build_fleet_host(spec, sink, interval_s=interval, default_duration_s=sim_duration)

        group = f"sensing-fleet-{fleet.name}"
        typer.echo(f"simulating {len(fleet.nodes)} nodes in {len(fleet.regions)} regions ({fleet.name})")
    else:
        try:
            identity = NodeIdentity(
                node_id or socket.gethostname(), region, zone or f"{region}-a", site or f"{region}-1", labels
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        config = RealAgentConfig(identity, interval, grace, peers, log_dir=log_dir)

        def build(sink: EventSink) -> AgentHost:
            real = build_real_agent(config, sink)
            if isinstance(real.gpu, NvmlUnavailable):
                typer.echo(f"no GPUs: {real.gpu.reason}; reporting the host only", err=True)
            return real.host

        group = f"sensing-agent-{identity.node_id}"

    if once:
        asyncio.run(_print_once(build))
        return
    settings = RunSettings(
        bootstrap=bootstrap,
        group_id=group,
        prefix=topic_prefix,
        interval_s=interval,
        probe_interval_s=probe_interval,
    )
    asyncio.run(_serve(settings, build, probe_port))


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"label {text!r}: expected KEY=VALUE")
    return key, value


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


async def _serve(settings: RunSettings, build: Build, probe_port: int) -> None:
    from suanli.sensing.adapters.probes import start_probe_listener
    from suanli.sensing.entrypoints.runtime import serve

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await start_probe_listener("0.0.0.0", probe_port) if probe_port else None
    try:
        await serve(settings, build, stop)
    finally:
        if server is not None:
            server.close()
