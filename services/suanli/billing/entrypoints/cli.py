"""`suanli serve billing`: the billing service's command line (mounted by the root `suanli` CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Billing: rating, ledger and invoices.", no_args_is_help=True)


@app.command("serve")
def serve(
    pricebook: Annotated[
        Path | None, typer.Option(help="Price book YAML (env SUANLI_BILLING_PRICEBOOK).")
    ] = None,
    listen: Annotated[str | None, typer.Option(help="gRPC address (env SUANLI_BILLING_LISTEN).")] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Port of /metrics, 0 picks one (env SUANLI_METRICS_PORT).")
    ] = None,
) -> None:
    """Billing: rate usage into the ledger, issue invoices, serve the Billing gRPC API.

    Broker from SUANLI_KAFKA_BOOTSTRAP, database from SUANLI_PG_DSN; see docs/billing.md, "Settings".
    """
    from suanli.billing.entrypoints.service import main
    from suanli.billing.entrypoints.settings import BillingSettings
    from suanli.settings import SettingsError

    try:
        settings = BillingSettings.load(pricebook=pricebook, listen=listen, metrics_port=metrics_port)
    except SettingsError as exc:
        raise typer.BadParameter(str(exc)) from exc
    main(settings)
