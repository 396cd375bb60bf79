"""`suanli serve metering`: the metering service's command line (mounted by the root `suanli` CLI).

Every option is a field of `MeteringSettings`; options left out keep the value from the environment or
the field's default (defaults are written only in the settings class).
"""

from __future__ import annotations

from typing import Any

import typer

from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.settings import load_or_usage_error, option

app = typer.Typer(help="Metering: capacity in CU, node liveness and usage windows.", no_args_is_help=True)


def _option(field: str, *flags: str) -> Any:
    return option(MeteringSettings, field, *flags)


@app.command("serve")
def serve(
    interval: float | None = _option("interval_s", "--interval"),
    lost_after: int | None = _option("lost_after", "--lost-after"),
    metrics_port: int | None = _option("metrics_port", "--metrics-port"),
    batch_max: int | None = _option("batch_max", "--batch-max"),
    fetch_wait_ms: int | None = _option("fetch_wait_ms", "--fetch-wait-ms"),
    loglevel: str = typer.Option("info", help="faust/worker log level."),
) -> None:
    """Metering: capacity in CU, node liveness and usage windows (faust worker).

    Broker from SUANLI_KAFKA_BOOTSTRAP, topic prefix from SUANLI_TOPIC_PREFIX.
    """
    from suanli.metering.entrypoints.worker import run

    settings = load_or_usage_error(
        MeteringSettings,
        interval_s=interval,
        lost_after=lost_after,
        metrics_port=metrics_port,
        batch_max=batch_max,
        fetch_wait_ms=fetch_wait_ms,
    )
    run(settings, loglevel=loglevel)
