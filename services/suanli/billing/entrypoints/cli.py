"""`suanli serve billing`: the billing service's command line (mounted by the root `suanli` CLI).

Every option is a field of `BillingSettings`; options left out keep the value from the environment or
the field's default (defaults are written only in the settings class).
"""

from __future__ import annotations

from pathlib import Path

import typer

from suanli.billing.entrypoints.settings import BillingSettings
from suanli.settings import load_or_usage_error, option

app = typer.Typer(help="Billing: rating, ledger and invoices.", no_args_is_help=True)


@app.command("serve")
def serve(
    pricebook: Path | None = option(BillingSettings, "pricebook", "--pricebook"),
    listen: str | None = option(BillingSettings, "listen", "--listen"),
    metrics_port: int | None = option(BillingSettings, "metrics_port", "--metrics-port"),
) -> None:
    """Billing: rate usage into the ledger, issue invoices, serve the Billing gRPC API.

    Broker from SUANLI_KAFKA_BOOTSTRAP, database from SUANLI_PG_DSN; see docs/billing.md, "Settings".
    """
    from suanli.billing.entrypoints.service import main

    main(load_or_usage_error(BillingSettings, pricebook=pricebook, listen=listen, metrics_port=metrics_port))
