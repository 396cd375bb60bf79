"""`suanli serve <service>`: run one service's long-lived process in the foreground."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Run a service in the foreground.", no_args_is_help=True)


@app.command()
def metering(
    interval: float = typer.Option(
        None, help="Seconds between liveness checks (env SUANLI_METERING_INTERVAL_S)."
    ),
    lost_after: int = typer.Option(None, help="Report intervals without a snapshot before a node is Lost."),
    metrics_port: int = typer.Option(None, help="Port of /metrics (0 picks one) (env SUANLI_METRICS_PORT)."),
    batch_max: int = typer.Option(
        None, help="Most records handled as one batch, default 500 (env SUANLI_METERING_BATCH_MAX)."
    ),
    fetch_wait_ms: int = typer.Option(
        None, help="Broker fetch wait in ms, default 100 (env SUANLI_METERING_FETCH_WAIT_MS)."
    ),
    loglevel: str = typer.Option("info", help="faust/worker log level."),
) -> None:
    """Metering: capacity in CU, node liveness and usage windows (faust worker).

    Broker from SUANLI_KAFKA_BOOTSTRAP, topic prefix from SUANLI_TOPIC_PREFIX.
    """
    from suanli.metering.entrypoints.config import ConfigError, MeteringConfig
    from suanli.metering.entrypoints.worker import run

    try:
        config = MeteringConfig.from_env(
            interval_s=interval,
            lost_after=lost_after,
            metrics_port=metrics_port,
            batch_max=batch_max,
            fetch_max_wait_ms=fetch_wait_ms,
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


@app.command()
def scheduling(
    dsn: str = typer.Option(None, help="PostgreSQL DSN (env SUANLI_PG_DSN)."),
    bootstrap: str = typer.Option(None, help="Kafka bootstrap HOST:PORT (env SUANLI_KAFKA_BOOTSTRAP)."),
    queues: str = typer.Option(None, help="Queue config YAML (example: deploy/scheduler/queues.yaml)."),
    listen: str = typer.Option("127.0.0.1:50051", help="gRPC listen address HOST:PORT."),
    policy: str = typer.Option("fgdb", help="Placement policy (fgdb, fgd, bestfit, packing, spread, ...)."),
    schema: str = typer.Option("scheduling", help="Event store schema in PostgreSQL."),
    topic_prefix: str = typer.Option(None, help="Topic prefix (env SUANLI_TOPIC_PREFIX)."),
    interval: float = typer.Option(0.5, help="Seconds between scheduling cycles (events also trigger one)."),
    reconcile_grace: float = typer.Option(15.0, help="Seconds before a disagreeing node report is acted on."),
    disruption_threshold: float = typer.Option(
        0.75,
        min=0.01,
        max=1.0,
        help="Hold evictions while this fraction of the fleet is Lost at once (a broker or network outage).",
    ),
    overcommit: float = typer.Option(1.0, help="Best-effort overcommit ratio of shared GPUs (>= 1)."),
    metrics_port: int = typer.Option(None, help="Port of /metrics (0 picks one) (env SUANLI_METRICS_PORT)."),
) -> None:
    """Scheduling: jobs and queues (event-sourced in PostgreSQL), the scheduling cycle, gRPC API.

    Several instances may run on one database: one leads (PostgreSQL advisory lock), the others serve
    reads and take over when it dies.
    """
    import asyncio
    import os

    from suanli.scheduling.entrypoints.app import serve
    from suanli.scheduling.entrypoints.config import SchedulingConfig

    dsn = dsn or os.environ.get("SUANLI_PG_DSN")
    bootstrap = bootstrap or os.environ.get("SUANLI_KAFKA_BOOTSTRAP")
    if not dsn:
        raise typer.BadParameter("--dsn or SUANLI_PG_DSN is required")
    if not bootstrap:
        raise typer.BadParameter("--bootstrap or SUANLI_KAFKA_BOOTSTRAP is required")
    if queues and not Path(queues).is_file():
        raise typer.BadParameter(f"--queues {queues}: no such file")
    config = SchedulingConfig(
        dsn=dsn, bootstrap=bootstrap, queues_path=Path(queues) if queues else None, schema=schema,
        topic_prefix=topic_prefix,
        listen=listen, policy=policy, interval_s=interval, reconcile_grace_s=reconcile_grace,
        disruption_threshold=disruption_threshold,
        overcommit_ratio=overcommit, metrics_port=metrics_port,
    )
    asyncio.run(serve(config))
