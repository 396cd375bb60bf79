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
