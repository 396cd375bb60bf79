"""`suanli up`: the platform, a simulated multi-region fleet and a mixed workload, with a live view."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from suanli.cli.client import EXIT_USAGE, Failure, fail
from suanli.cli.config import config_path
from suanli.data import data_path
from suanli.platform.demo_service import DEFAULT_SPEED
from suanli.platform.stack import DEFAULT_FLEET, DEFAULT_PRICEBOOK, DEFAULT_QUEUES
from suanli.platform.up import UpError, UpOptions, run_up
from suanli.platform.workload import DemoWorkloadError
from suanli.sensing.domain.fleet import FleetError

DEFAULT_WORKLOAD = data_path("deploy/workloads/mixed.yaml")

ExistingFile = dict(exists=True, dir_okay=False, readable=True)


def up(
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            min=1,
            metavar="SECONDS",
            help="Stop submitting after this long, wait for in-flight jobs, then shut down. "
            "Default: run until Ctrl-C.",
        ),
    ] = None,
    fleet: Annotated[Path, typer.Option(help="Simulated fleet file.", **ExistingFile)] = DEFAULT_FLEET,
    workload: Annotated[Path, typer.Option(help="Workload file.", **ExistingFile)] = DEFAULT_WORKLOAD,
    policy: Annotated[
        str | None, typer.Option(help="Placement policy of the scheduler (default: the platform's).")
    ] = None,
    queues: Annotated[Path, typer.Option(help="Queue and quota file.", **ExistingFile)] = DEFAULT_QUEUES,
    pricebook: Annotated[Path, typer.Option(help="Billing price book.", **ExistingFile)] = DEFAULT_PRICEBOOK,
    headless: Annotated[
        bool, typer.Option("--headless", help="No live view: progress lines, a summary, then exit.")
    ] = False,
    grace: Annotated[
        float,
        typer.Option(min=0, metavar="SECONDS", help="With --duration: how long in-flight jobs may take."),
    ] = 120.0,
    home: Annotated[
        Path, typer.Option(help="State and logs (<home>/logs/*.log); its database is replaced each run.")
    ] = Path(".suanli/up"),
    auth: Annotated[
        bool,
        typer.Option(
            "--auth/--no-auth",
            help="Tokens on every gRPC service; the CLI's context carries a platform-admin token "
            "(docs/security.md).",
        ),
    ] = True,
    tls: Annotated[
        bool,
        typer.Option(
            "--tls/--no-tls",
            help="TLS on every gRPC service with a development CA in <home>/tls/ (the CLI's context "
            "trusts it; docs/security.md).",
        ),
    ] = True,
    context: Annotated[
        bool,
        typer.Option(
            "--context/--no-context",
            help="Write the CLI's context 'up' (addresses, token, CA) into your CLI config (--config, "
            "SUANLI_CONFIG or ~/.config/suanli/config.yaml) and make it current; without, only "
            "<home>/config.yaml has it.",
        ),
    ] = True,
    inference: Annotated[
        bool,
        typer.Option(
            "--inference/--no-inference",
            help="Create an inference service and replay the Azure LLM trace against it through the "
            "request gateway; the summary reports SLO attainment and GPU-seconds (docs/demo.md).",
        ),
    ] = True,
    inference_speed: Annotated[
        float,
        typer.Option(
            "--inference-speed",
            min=0.01,
            metavar="X",
            help="Replay the trace this many times as fast as it arrived (1: ~5.5 requests/s).",
        ),
    ] = DEFAULT_SPEED,
) -> None:
    """Start the whole platform locally, submit a mixed workload from three tenants, and show it live.

    Exit code 0 when every submitted job reached a final state and the platform stayed healthy.
    """
    options = UpOptions(
        home=home.resolve(),
        workload=workload,
        fleet=fleet,
        queues=queues,
        pricebook=pricebook,
        policy=policy,
        duration_s=duration,
        grace_s=grace,
        headless=headless,
        auth=auth,
        tls=tls,
        user_config=config_path() if context else None,
        inference=inference,
        inference_speed=inference_speed,
    )
    try:
        # Headless output goes to logs and CI: long lines stay whole instead of wrapping at 80 columns.
        console = Console(highlight=False, width=160 if headless else None)
        code = run_up(options, console)
    except (UpError, DemoWorkloadError, FleetError) as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    raise typer.Exit(code)
