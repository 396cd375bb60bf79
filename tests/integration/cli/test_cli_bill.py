"""`suanli bill usage|charges|invoice|close` against the real billing service, after usage is rated."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from billing.billing_testkit import (
    JAN,
    PRICEBOOK,
    REGIONS,
    TERMS,
    Env,
    ManualClock,
    Window,
    eventually,
    expected_amount,
)
from click.testing import Result
from pagekit import GARBAGE, assert_pages, follow

from suanli.billing.entrypoints.service import running
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.bus import EventPublisher
from suanli.cli.main import app

from .clikit import RUNNER, invoke

pytestmark = pytest.mark.timeout(120)

# Short sessions, so the consumer joins its group quickly on the shared broker.
FAST_SESSION_MS = 6000


def usage() -> list[Window]:
    """acme: three whole minutes on H200 in cn-east, and a best-effort job on H200 + CPU in cn-west."""
    out = [
        Window("job-std", "job-std/t0", "n-east", JAN + timedelta(minutes=i), 60, h200_cu=100)
        for i in range(3)
    ]
    out.append(Window("job-cheap", "job-cheap/t0", "n-west", JAN, 45, h200_cu=200, cpu_cu=2))
    return out


def csv_rows(result: Result) -> list[dict[str, str]]:
    """`-o csv` parsed back: a header, then one row per line."""
    return list(csv.DictReader(io.StringIO(result.stdout)))


async def test_bill_commands_after_usage_is_billed(
    kafka_bootstrap: str, pg_dsn: str, topic_prefix: str, tmp_path: Path
) -> None:
    book = tmp_path / "pricebook.yaml"
    book.write_text(PRICEBOOK)
    env = Env(kafka_bootstrap, pg_dsn, topic_prefix, f"bil_{secrets.token_hex(4)}", book)
    config = BillingSettings.load(
        {},
        kafka_bootstrap=env.bootstrap,
        pg_dsn=env.dsn,
        pricebook=env.pricebook,
        db_schema=env.schema,
        topic_prefix=env.prefix,
        close_check_s=3600,  # periods are closed by `bill close` below, not by the clock-driven check
        listen="127.0.0.1:0",
        session_timeout_ms=FAST_SESSION_MS,
    )
    windows = usage()
    total = sum(expected_amount(w, TERMS, REGIONS) for w in windows)
    charges = sum((w.h200_cu > 0) + (w.cpu_cu > 0) for w in windows)
    clock = ManualClock(datetime(2025, 1, 20, tzinfo=UTC))
    async with EventPublisher(env.bootstrap) as publisher, running(config, clock) as billing:
        await env.publish_facts(publisher)
        await env.publish_usage(publisher, windows)
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == charges)
        address = f"127.0.0.1:{billing.grpc_port}"

        async def bill(*args: str) -> Result:
            result = await invoke("bill", *args, "--tenant", "acme", "--billing", address)
            assert result.exit_code == 0, result.output
            return result

        # charges: every row, the same as the ledger holds (CSV parsed back, then JSON parsed back)
        result = await bill("charges", "--period", "2025-01", "-o", "csv")
        rows = csv_rows(result)
        assert len(rows) == charges
        assert sum(Decimal(r["amount"]) for r in rows) == total == Decimal("20.716875")
        stored = "SELECT count(*) FROM {s}.charges WHERE tenant = 'acme' AND charge_id::text = ANY($1)"
        assert await env.fetchval(stored, [r["charge_id"] for r in rows]) == charges
        assert {r["task_id"] for r in rows} == {"job-std/t0", "job-cheap/t0"}
        assert {(r["currency"], r["billing_period"], r["adjustment"]) for r in rows} == {
            ("CNY", "2025-01", "")
        }
        by_class = {(r["device_class"], r["region"], r["tier"]) for r in rows}
        assert by_class == {
            ("h200", "cn-east", "standard"),
            ("h200", "cn-west", "best-effort"),
            ("cpu", "cn-west", "best-effort"),
        }
        as_json = json.loads((await bill("charges", "--period", "2025-01", "-o", "json")).stdout)
        assert [(c["charge_id"], c["amount"]) for c in as_json["charges"]] == [
            (r["charge_id"], r["amount"]) for r in rows
        ]

        # newest recorded first, in pages that --continue follows to the end
        order = "SELECT array_agg(charge_id::text ORDER BY seq DESC) FROM {s}.charges WHERE tenant = 'acme'"
        newest = await env.fetchval(order)
        assert [r["charge_id"] for r in rows] == newest
        argv = ["bill", "charges", "-p", "2025-01", "-o", "csv", "--tenant", "acme", "--billing", address]

        def run(extra: Sequence[str]) -> Result:
            return RUNNER.invoke(app, [*argv, *extra])

        pages = await asyncio.to_thread(follow, run, lambda out: list(csv.DictReader(io.StringIO(out))), 2)
        assert_pages(pages, rows, newest=lambda row: -newest.index(row["charge_id"]))
        garbage = await asyncio.to_thread(run, ["--continue", GARBAGE])
        assert garbage.exit_code == 3 and garbage.stderr.startswith("error: INVALID_ARGUMENT: page_token:")
        assert len(garbage.stderr.strip().splitlines()) == 1

        # defaults: charges of the current period (January, by the clock), or all with --period all
        assert csv_rows(await bill("charges", "-o", "csv")) == rows
        only = csv_rows(await bill("charges", "--job", "job-cheap", "--period", "all", "-o", "csv"))
        assert {r["job_id"] for r in only} == {"job-cheap"} and len(only) == 2

        # usage: per device class and region, summing to the same amount; the default is the current period
        used = csv_rows(await bill("usage", "-o", "csv"))
        amounts = {(r["device_class"], r["region"]): Decimal(r["amount"]) for r in used}
        # 3 min x 100 CU at 3.60 = 18; 45 s x 200 CU at 2.88 x 0.5 x 0.75 = 2.7; 45 s x 2 CU at 1.80 x 0.375
        assert amounts == {
            ("h200", "cn-east"): Decimal("18"),
            ("h200", "cn-west"): Decimal("2.7"),
            ("cpu", "cn-west"): Decimal("0.016875"),
        }
        usage_json = json.loads((await bill("usage", "-o", "json")).stdout)
        assert (usage_json["period"]["label"], Decimal(usage_json["total"])) == ("2025-01", total)
        assert yaml.safe_load((await bill("usage", "-o", "yaml")).stdout) == usage_json
        table = (await bill("usage")).stdout
        assert f"acme usage 2025-01: {total} CNY" in table and "DEVICE CLASS" in table
        assert not any(c in table for c in "┏━│└")  # plain columns, as the job tables

        # invoice: none before the period is closed (exit 3: the service refused, as for the scheduler)
        missing = await invoke("bill", "invoice", "--tenant", "acme", "--billing", address)
        assert missing.exit_code == 3, missing.output
        assert missing.stderr.strip() == (
            "error: NOT_FOUND: no invoice issued to tenant 'acme' yet: "
            "a period is invoiced 900 s after it ends"
        )

        # close without --period: the period that ended last (January, once February began)
        clock.current = datetime(2025, 2, 1, 0, 5, tzinfo=UTC)
        closed = json.loads((await bill("close", "-o", "json")).stdout)
        assert closed["period"]["label"] == "2025-01"
        result = await bill("invoice")  # the latest invoice, without --period
        assert f"{total} CNY" in result.stdout and "2025-01" in result.stdout
        invoice = csv_rows(await bill("invoice", "-o", "csv"))
        assert [r["device_class"] for r in invoice] == ["cpu", "h200"]
        assert sum(Decimal(r["amount"]) for r in invoice) == total == Decimal(closed["total"])
        assert all(r["adjustment_of"] == "" for r in invoice)
        stored_total = "SELECT total FROM {s}.invoices WHERE tenant = 'acme' AND period_label = '2025-01'"
        assert await env.fetchval(stored_total) == total
        assert json.loads((await bill("invoice", "--period", "2025-01", "-o", "json")).stdout) == closed

        # an unknown tenant: a one-line error and a non-zero exit, for every command
        for command in ("usage", "charges", "invoice", "close"):
            wrong = await invoke("bill", command, "--tenant", "acmee", "--billing", address)
            assert wrong.exit_code == 3, (command, wrong.output)
            assert wrong.stderr.strip() == (
                "error: NOT_FOUND: unknown tenant 'acmee': billing has seen no job, charge or invoice of it"
            ), command
            assert wrong.stdout == ""
