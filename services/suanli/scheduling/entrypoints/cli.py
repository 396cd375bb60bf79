"""`suanli serve scheduling`: the scheduling service's command line (mounted by the root `suanli` CLI).

Every option is a field of `SchedulingSettings` under the same name; an option not given is None, so
the environment or the field's default applies (defaults are written only in the settings class).
"""

from __future__ import annotations

from typing import Any

import typer

from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.settings import load_or_usage_error, option

app = typer.Typer(help="Scheduling: jobs, queues and the scheduling cycle.", no_args_is_help=True)


def _option(field: str, *flags: str, **extra: Any) -> Any:
    return option(SchedulingSettings, field, *flags, **extra)


@app.command("serve")
def serve(
    dsn: str | None = _option("dsn", "--dsn"),
    bootstrap: str | None = _option("bootstrap", "--bootstrap"),
    queues_path: str | None = _option("queues_path", "--queues"),
    listen: str | None = _option("listen", "--listen"),
    policy: str | None = _option("policy", "--policy"),
    store_schema: str | None = _option("store_schema", "--schema"),
    topic_prefix: str | None = _option("topic_prefix", "--topic-prefix"),
    interval_s: float | None = _option("interval_s", "--interval"),
    reconcile_grace_s: float | None = _option("reconcile_grace_s", "--reconcile-grace"),
    disruption_threshold: float | None = _option("disruption_threshold", "--disruption-threshold"),
    overcommit_ratio: float | None = _option("overcommit_ratio", "--overcommit"),
    wave_size: int | None = _option("wave_size", "--wave-size"),
    metrics_port: int | None = _option("metrics_port", "--metrics-port"),
) -> None:
    """Scheduling: jobs and queues (event-sourced in PostgreSQL), the scheduling cycle, gRPC API.

    Several instances may run on one database: one leads (a lease with an epoch in PostgreSQL), the
    others serve reads and take over when it dies or its lease runs out.
    """
    import asyncio

    from suanli.scheduling.entrypoints.app import serve as run

    settings = load_or_usage_error(
        SchedulingSettings,
        dsn=dsn,
        bootstrap=bootstrap,
        queues_path=queues_path,
        listen=listen,
        policy=policy,
        store_schema=store_schema,
        topic_prefix=topic_prefix,
        interval_s=interval_s,
        reconcile_grace_s=reconcile_grace_s,
        disruption_threshold=disruption_threshold,
        overcommit_ratio=overcommit_ratio,
        wave_size=wave_size,
        metrics_port=metrics_port,
    )
    asyncio.run(run(settings))
