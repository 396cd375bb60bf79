"""`suanli serve serving` and `suanli serve serving-autoscaler`: the serving service's command lines
(mounted by the root `suanli` CLI).

Every option is a field of `ServingSettings`; options left out keep the value from the environment or
the field's default (defaults are written only in the settings class).
"""

from __future__ import annotations

import typer

from suanli.serving.entrypoints.settings import ServingSettings
from suanli.settings import load_or_usage_error, option

app = typer.Typer(help="Serving: inference services and their replicas.", no_args_is_help=True)


@app.command("serve")
def serve(
    listen: str | None = option(ServingSettings, "listen", "--listen"),
    metrics_port: int | None = option(ServingSettings, "metrics_port", "--metrics-port"),
) -> None:
    """Serving: keep inference services at their replica count through the scheduler; serve its gRPC API.

    Broker from SUANLI_KAFKA_BOOTSTRAP, database from SUANLI_PG_DSN; see docs/serving.md, "Settings".
    """
    from suanli.serving.entrypoints.service import main

    main(load_or_usage_error(ServingSettings, listen=listen, metrics_port=metrics_port))


# Mounted by the root CLI as `suanli serve serving-autoscaler` (not on `app`: `suanli serve serving` is
# that one command).
def autoscaler(
    metrics_port: int | None = option(ServingSettings, "metrics_port", "--metrics-port"),
) -> None:
    """The autoscaler alone: sizes autoscaled services from services.load, one process at a time (lease).

    Run serving with SUANLI_SERVING_AUTOSCALER=false beside it; see docs/serving.md, "The autoscaler".
    """
    from suanli.serving.entrypoints.autoscaler import main

    main(load_or_usage_error(ServingSettings, metrics_port=metrics_port))
