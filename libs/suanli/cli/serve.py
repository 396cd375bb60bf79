"""`suanli serve <service>`: run one service's long-lived process in the foreground."""

from __future__ import annotations

import typer

app = typer.Typer(help="Run a service in the foreground.", no_args_is_help=True)


@app.command()
def metering(
    interval: float = typer.Option(
        None, help="Seconds between liveness checks (env SUANLI_METERING_INTERVAL_S)."
    ),
    lost_after: int = typer.Option(None, help="Report intervals without a snapshot before a node is Lost."),
    metrics_port: int = typer.Option(None, help="Port of /metrics (0 picks one) (env SUANLI_METRICS_PORT)."),
    loglevel: str = typer.Option("info", help="faust/worker log level."),
) -> None:
    """Metering: capacity in CU, node liveness and usage windows (faust worker).

    Broker from SUANLI_KAFKA_BOOTSTRAP, topic prefix from SUANLI_TOPIC_PREFIX.
    """
    from suanli.metering.entrypoints.config import ConfigError, MeteringConfig
    from suanli.metering.entrypoints.worker import run

    try:
        config = MeteringConfig.from_env(
            interval_s=interval, lost_after=lost_after, metrics_port=metrics_port
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    run(config, loglevel=loglevel)


@app.command()
def billing(
    pricebook: str = typer.Option(None, help="Price book YAML (env SUANLI_BILLING_PRICEBOOK)."),
    listen: str = typer.Option(None, help="gRPC address, default 0.0.0.0:50055 (env SUANLI_BILLING_LISTEN)."),
    metrics_port: int = typer.Option(None, help="Port of /metrics (0 picks one) (env SUANLI_METRICS_PORT)."),
) -> None:
    """Billing: rate usage into the ledger, issue invoices, serve the Billing gRPC API.

    Broker from SUANLI_KAFKA_BOOTSTRAP, database from SUANLI_PG_DSN; see docs/billing.md.
    """
    from pathlib import Path

    from suanli.billing.entrypoints.service import BillingConfig, ConfigError, main

    try:
        config = BillingConfig.from_env(
            pricebook=Path(pricebook) if pricebook else None, grpc_addr=listen, metrics_port=metrics_port
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    main(config)
