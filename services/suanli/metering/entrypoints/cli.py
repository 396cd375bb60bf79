"""`suanli serve metering`: the metering service's command line (mounted by the root `suanli` CLI)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Metering: capacity in CU, node liveness and usage windows.", no_args_is_help=True)


@app.command("serve")
def serve(
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
