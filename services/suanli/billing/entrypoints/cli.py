"""`suanli serve billing`: the billing service's command line (mounted by the root `suanli` CLI)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Billing: rating, ledger and invoices.", no_args_is_help=True)


@app.command("serve")
def serve(
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
