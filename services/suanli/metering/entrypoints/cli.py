"""`suanli serve metering`: the metering service's command line (mounted by the root `suanli` CLI).

Options left out keep the value from the environment or the default in `MeteringSettings`.
"""

from __future__ import annotations

import typer

app = typer.Typer(help="Metering: capacity in CU, node liveness and usage windows.", no_args_is_help=True)


@app.command("serve")
def serve(
    interval: float | None = typer.Option(
        None, help="Seconds between liveness checks (SUANLI_METERING_INTERVAL_S)."
    ),
    lost_after: int | None = typer.Option(
        None, help="Report intervals without a snapshot before a node is Lost (SUANLI_METERING_LOST_AFTER)."
    ),
    metrics_port: int | None = typer.Option(
        None, help="Port of /metrics, 0 picks one (SUANLI_METRICS_PORT)."
    ),
    batch_max: int | None = typer.Option(
        None, help="Most records handled as one batch (SUANLI_METERING_BATCH_MAX)."
    ),
    fetch_wait_ms: int | None = typer.Option(
        None, help="Broker fetch wait in ms (SUANLI_METERING_FETCH_WAIT_MS)."
    ),
    loglevel: str = typer.Option("info", help="faust/worker log level."),
) -> None:
    """Metering: capacity in CU, node liveness and usage windows (faust worker).

    Broker from SUANLI_KAFKA_BOOTSTRAP, topic prefix from SUANLI_TOPIC_PREFIX.
    """
    from suanli.metering.entrypoints.settings import MeteringSettings
    from suanli.metering.entrypoints.worker import run
    from suanli.settings import SettingsError

    try:
        settings = MeteringSettings.load(
            interval_s=interval,
            lost_after=lost_after,
            metrics_port=metrics_port,
            batch_max=batch_max,
            fetch_wait_ms=fetch_wait_ms,
        )
    except SettingsError as exc:
        raise typer.BadParameter(str(exc)) from exc
    run(settings, loglevel=loglevel)
