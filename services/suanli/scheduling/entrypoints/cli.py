"""`suanli serve scheduling`: the scheduling service's command line (mounted by the root `suanli` CLI)."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Scheduling: jobs, queues and the scheduling cycle.", no_args_is_help=True)


@app.command("serve")
def serve(
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
        dsn=dsn,
        bootstrap=bootstrap,
        queues_path=Path(queues) if queues else None,
        schema=schema,
        topic_prefix=topic_prefix,
        listen=listen,
        policy=policy,
        interval_s=interval,
        reconcile_grace_s=reconcile_grace,
        disruption_threshold=disruption_threshold,
        overcommit_ratio=overcommit,
        metrics_port=metrics_port,
    )
    asyncio.run(serve(config))
