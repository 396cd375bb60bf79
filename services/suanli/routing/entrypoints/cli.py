"""`suanli serve routing`: the routing service's command line (mounted by the root `suanli` CLI).

Every option is a field of `RoutingSettings` under the same name; an option not given is None, so the
environment or the field's default applies (defaults are written only in the settings class).
"""

from __future__ import annotations

from typing import Any

import typer

from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.settings import load_or_usage_error, option

app = typer.Typer(help="Routing: the network-state view and compute-aware steering.", no_args_is_help=True)


def _option(field: str, *flags: str, **extra: Any) -> Any:
    return option(RoutingSettings, field, *flags, **extra)


@app.command("serve")
def serve(
    bootstrap: str | None = _option("bootstrap", "--bootstrap"),
    topic_prefix: str | None = _option("topic_prefix", "--topic-prefix"),
    listen: str | None = _option("listen", "--listen"),
    role: str | None = _option("role", "--role"),
    pricebook: str | None = _option("pricebook", "--pricebook"),
    probe_interval_s: float | None = _option("probe_interval_s", "--probe-interval"),
    down_after: int | None = _option("down_after", "--down-after"),
    metrics_port: int | None = _option("metrics_port", "--metrics-port"),
    loglevel: str = typer.Option("info", "--loglevel", help="faust worker log level."),
) -> None:
    """Routing: the network view (faust, links.measured -> network.links) and the Routing gRPC API."""
    from suanli.routing.entrypoints.app import serve as run

    settings = load_or_usage_error(
        RoutingSettings,
        bootstrap=bootstrap,
        topic_prefix=topic_prefix,
        listen=listen,
        role=role,
        pricebook=pricebook,
        probe_interval_s=probe_interval_s,
        down_after=down_after,
        metrics_port=metrics_port,
    )
    run(settings, loglevel=loglevel)
