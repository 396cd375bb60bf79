"""Entry point of the `suanli` console script: one typer app, sub-commands registered by each area."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

# name -> (module:attribute, the line `suanli --help` shows). The module is imported only when the
# command runs (or its own --help is asked for), so `suanli --help` and each command start fast
# (docs/BENCHMARKS.md, "CLI start-up"); tests/unit/cli checks each line against the command's own help.
# An attribute is a typer app (a command group), a command function, or a factory of a typer app.
COMMANDS: dict[str, tuple[str, str]] = {
    "up": (
        "suanli.cli.up:up",
        "Start the whole platform locally, submit a mixed workload from three tenants, and show it live.",
    ),
    "console": (
        "suanli.console.cli:console",
        "Serve the web console: capacity, nodes, queues, jobs, inference services, network and charges,",
    ),
    "job": ("suanli.cli.job:app", "Submit and follow jobs."),
    "acct": (
        "suanli.cli.acct:acct",
        "Accounting per job, newest first: elapsed, GPU-hours, CU-hours and cost (like sacct).",
    ),
    "nodes": ("suanli.cli.nodes:nodes", "List nodes with free/total CPU, memory and GPUs."),
    "queues": ("suanli.cli.queues:queues", "List queues, or show one."),
    "queue": ("suanli.cli.queue:app", "Administer queues, quotas, cohorts and priority classes."),
    "bill": ("suanli.cli.bill:app", "Usage, charges and invoices from the billing service."),
    "service": ("suanli.cli.service:app", "Create, scale, watch, explain and delete inference services."),
    "network": (
        "suanli.cli.network:network",
        "The network view: region RTT / loss / status matrix (and site paths with --sites).",
    ),
    "route": ("suanli.cli.network:route_app", "Ask the routing service where a workload should go."),
    "gateway": (
        "suanli.inference.gateway:gateway",
        "Serve an HTTP request gateway: resolve an inference replica through routing and forward to it.",
    ),
    "serve": ("suanli.cli.main:serve_app", "Run a service in the foreground."),
    "agent": (
        "suanli.sensing.entrypoints.cli:agent",
        "Report this node (or a simulated fleet) to Suanli and run the tasks placed on it.",
    ),
    "simulate": (
        "suanli.cli.simulate:simulate",
        "Replay a pod list against placement policies; report unallocated GPU % vs arrived workload.",
    ),
    "dlq": ("suanli.cli.dlq:app", "Inspect, replay and purge dead-letter topics (<topic>.dlq)."),
    "outbox": (
        "suanli.cli.outbox:app",
        "Outbox rows the relay parked (refused by the broker) and putting them back.",
    ),
    "dev": (
        "suanli.cli.dev:app",
        "Start, inspect and stop the local broker and PostgreSQL; create development TLS certificates; "
        "provision database roles and Kafka ACLs.",
    ),
    "auth": ("suanli.cli.auth:app", "Signing keys and access tokens (docs/security.md)."),
    "config": (
        "suanli.cli.contexts:app",
        "Client config contexts: servers and token (get-contexts, use-context, set-context, view).",
    ),
    "doctor": (
        "suanli.cli.doctor:doctor",
        "Check the configuration: Kafka security, database role and TLS, endpoints, token, certificates.",
    ),
    "audit": (
        "suanli.cli.audit:audit",
        "Who did what, newest first: jobs submitted and cancelled, queues and priority classes changed,",
    ),
}

FACTORIES = frozenset({"serve"})  # attributes that build their typer app when called


def load_command(name: str) -> Any:
    """The click command behind `suanli NAME`, importing its module."""
    target, _ = COMMANDS[name]
    module, _, attribute = target.partition(":")
    obj: Any = getattr(importlib.import_module(module), attribute)
    if name in FACTORIES:
        obj = obj()
    command: Any  # typer's own (vendored) click command
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)  # a group even of one command: `suanli route resolve`
    else:
        single = typer.Typer()
        single.command(name)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """The root command: its sub-commands are imported when used; the help lists them from COMMANDS."""

    listing = False  # while the root help is being written: no imports, placeholders with the help line

    # Context, command and formatter are typer's own click (vendored), hence Any in these overrides.
    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in COMMANDS:
            return found
        if self.listing:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
        command = load_command(cmd_name)
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(
    name="suanli",
    cls=LazyGroup,
    help="Suanli (算力): compute-power scheduling for multi-region GPU clusters.",
    no_args_is_help=True,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"suanli {version('suanli')}")
        raise typer.Exit()


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
            help="Client config (default $XDG_CONFIG_HOME/suanli/config.yaml, i.e. "
            "~/.config/suanli/config.yaml; a legacy ~/.suanli/config.yaml while only that exists).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Suanli (算力): compute-power scheduling for multi-region GPU clusters."""
    from suanli.cli import config

    config.SELECTED.token, config.SELECTED.context, config.SELECTED.config = token, context, config_file
    config.SELECTED.ca = ca


def serve_app() -> typer.Typer:
    """`suanli serve ...`: each service owns its command line (entrypoints/cli.py); this gathers them."""
    from suanli.billing.entrypoints import cli as billing
    from suanli.bus import no_auto_create
    from suanli.metering.entrypoints import cli as metering
    from suanli.routing.entrypoints import cli as routing
    from suanli.scheduling.entrypoints import cli as scheduling
    from suanli.serving.entrypoints import cli as serving

    # A service never recreates a topic a restarted broker lost: `ensure_topics` does (see the module).
    no_auto_create.install()
    serve = typer.Typer(help=COMMANDS["serve"][1], no_args_is_help=True)
    for name, service in (
        ("scheduling", scheduling),
        ("metering", metering),
        ("routing", routing),
        ("billing", billing),
        ("serving", serving),
    ):
        serve.command(name)(service.serve)
    # The autoscaler apart from serving, so that it can be stopped (or fail) on its own.
    serve.command("serving-autoscaler")(serving.autoscaler)
    return serve


if __name__ == "__main__":
    app()
