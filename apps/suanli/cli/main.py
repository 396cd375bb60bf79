"""Entry point of the `suanli` console script: one typer app, sub-commands registered by each area."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="suanli",
    help="Suanli (算力): compute-power scheduling for multi-region GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Access token for every call (over SUANLI_TOKEN and the config's).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            envvar="SUANLI_CONTEXT",
            help="Context of the config file to use.",
            show_default=False,
        ),
    ] = None,
    ca: Annotated[
        Path | None,
        typer.Option(
            "--ca",
            envvar="SUANLI_CA",
            help="CA certificate (PEM) to trust: talk TLS to the servers (over the config's `ca`).",
            show_default=False,
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="SUANLI_CONFIG",
            help="Client config (default ~/.suanli/config.yaml).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Suanli (算力): compute-power scheduling for multi-region GPU clusters."""
    from suanli.cli import config

    config.SELECTED.token, config.SELECTED.context, config.SELECTED.config = token, context, config_file
    config.SELECTED.ca = ca


def _register() -> None:
    # Imported here so that `suanli --help` stays one module deep until a command is chosen.
    from suanli.billing.entrypoints import cli as billing
    from suanli.cli import (
        audit,
        auth,
        bill,
        dev,
        dlq,
        job,
        network,
        nodes,
        outbox,
        queue,
        queues,
        simulate,
        up,
    )
    from suanli.metering.entrypoints import cli as metering
    from suanli.routing.entrypoints import cli as routing
    from suanli.scheduling.entrypoints import cli as scheduling
    from suanli.sensing.entrypoints import cli as sensing

    app.command("up")(up.up)
    app.add_typer(job.app, name="job")
    app.command("nodes")(nodes.nodes)
    app.command("queues")(queues.queues)
    app.add_typer(queue.app, name="queue")
    app.add_typer(bill.app, name="bill")
    app.command("network")(network.network)
    app.add_typer(network.route_app, name="route")
    # Each service owns its command line (entrypoints/cli.py); `serve` gathers their servers.
    serve = typer.Typer(help="Run a service in the foreground.", no_args_is_help=True)
    for name, service in (
        ("scheduling", scheduling),
        ("metering", metering),
        ("routing", routing),
        ("billing", billing),
    ):
        serve.command(name)(service.serve)
    app.add_typer(serve, name="serve")
    app.command("agent")(sensing.agent)
    app.command("simulate")(simulate.simulate)
    app.add_typer(dlq.app, name="dlq")
    app.add_typer(outbox.app, name="outbox")
    app.add_typer(dev.app, name="dev")
    app.add_typer(auth.app, name="auth")
    app.command("audit")(audit.audit)


_register()

if __name__ == "__main__":
    app()
