"""The Billing gRPC API on the in-memory adapters: answers, and the status and message of each refusal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import grpc
import pytest
from billing_unit_kit import JAN, STANDARD, Billing, billing, usage

from suanli.api.billing.v1 import billing_pb2 as pb
from suanli.api.billing.v1 import billing_pb2_grpc as pb_grpc
from suanli.auth import context as auth_context
from suanli.auth.principal import Principal, Role
from suanli.billing.domain.periods import Calendar
from suanli.billing.entrypoints.grpc_api import BillingApi, start_server

UNKNOWN = "billing has seen no job, charge or invoice of it"


@pytest.fixture
async def served() -> AsyncIterator[tuple[Billing, pb_grpc.BillingStub]]:
    b = billing()
    async with b.uow.begin() as unit:
        await b.service.job_submitted(unit, "job-1", "acme", STANDARD)
        await b.service.node_located(unit, "n-east", "cn-east")
        for n in range(3):
            await b.service.usage_metered(unit, usage(n, start=JAN + timedelta(minutes=n)))
    api = BillingApi(b.queries, b.uow, b.service, Calendar(), "CNY", b.clock.now)
    server, port = await start_server(api, "127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield b, pb_grpc.BillingStub(channel)
    finally:
        await server.stop(None)


async def test_usage_charges_and_invoice_are_served(served: tuple[Billing, pb_grpc.BillingStub]) -> None:
    b, stub = served
    now = await stub.GetUsage(pb.GetUsageRequest(tenant="acme"))  # the clock's period: January
    assert (now.period.label, now.total, now.currency) == ("2025-01", "18.000000", "CNY")
    assert [(r.device_class, r.region, r.cu_hours, r.charges) for r in now.rows] == [
        ("h200", "cn-east", "5.000000", 3)
    ]
    first = await stub.ListCharges(pb.ListChargesRequest(tenant="acme", page_size=2))
    rest = await stub.ListCharges(pb.ListChargesRequest(tenant="acme", page_token=first.next_page_token))
    assert [len(first.charges), len(rest.charges), rest.next_page_token] == [2, 1, ""]
    b.clock.set(datetime(2025, 2, 1, tzinfo=UTC))
    invoice = await stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acme", period="2025-01"))
    again = await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme", period="2025-01"))
    assert invoice == again and Decimal(invoice.total) == Decimal(18)


async def test_each_rpc_has_a_default_period(served: tuple[Billing, pb_grpc.BillingStub]) -> None:
    b, stub = served
    b.clock.set(datetime(2025, 2, 1, 0, 5, tzinfo=UTC))  # January ended, its grace not yet passed
    # close: the period that ended last; invoice: the latest one issued (never the running period).
    closed = await stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acme"))
    latest = await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme"))
    assert (closed.period.label, latest) == ("2025-01", closed)
    assert Decimal(latest.total) == Decimal(18)
    # usage: the running period, or relative to it; charges: every period unless one is named.
    assert (await stub.GetUsage(pb.GetUsageRequest(tenant="acme"))).period.label == "2025-02"
    previous = await stub.GetUsage(pb.GetUsageRequest(tenant="acme", period="previous"))
    assert (previous.period.label, previous.total) == ("2025-01", "18.000000")
    assert len((await stub.ListCharges(pb.ListChargesRequest(tenant="acme"))).charges) == 3
    current = await stub.ListCharges(pb.ListChargesRequest(tenant="acme", period="current"))
    assert list(current.charges) == []


async def test_a_tenant_bound_caller_gets_its_new_tenants_empty_answers(
    served: tuple[Billing, pb_grpc.BillingStub],
) -> None:
    # Its token is the platform's word that the tenant exists, though billing saw nothing of it yet.
    b, _ = served
    api = BillingApi(b.queries, b.uow, b.service, Calendar(), "CNY", b.clock.now)
    newcomer = Principal("ann", "newco", frozenset({Role.TENANT_ADMIN}), "tok-1", 0)
    token = auth_context.PRINCIPAL.set(newcomer)
    try:
        answer = await api.GetUsage(pb.GetUsageRequest(tenant="newco"), context=None)  # type: ignore[arg-type]
    finally:
        auth_context.PRINCIPAL.reset(token)
    assert (answer.tenant, answer.total, list(answer.rows)) == ("newco", "0.000000", [])


@pytest.mark.parametrize(
    ("call", "code", "details"),
    [
        (("GetUsage", pb.GetUsageRequest(tenant=" ")), "INVALID_ARGUMENT", "tenant: required"),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="acme", period="January")),
            "INVALID_ARGUMENT",
            "period: period must be YYYY-MM, YYYY-MM-DD, YYYY-MM-DDTHH:MMZ, current or previous, "
            "got 'January'",
        ),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="acme")),
            "NOT_FOUND",
            "no invoice issued to tenant 'acme' yet: a period is invoiced 900 s after it ends",
        ),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="acme", period="2025-13")),
            "INVALID_ARGUMENT",
            "period: period '2025-13': month must be in 1..12",
        ),
        (
            ("ListCharges", pb.ListChargesRequest(tenant="acme", page_size=1001)),
            "INVALID_ARGUMENT",
            "page_size: must be 0..1000, got 1001",
        ),
        (
            ("ListCharges", pb.ListChargesRequest(tenant="acme", page_token="bm90IGEgdG9rZW4=")),
            "INVALID_ARGUMENT",
            "page_token: not a token from ListCharges in this order",
        ),
        (
            ("ListCharges", pb.ListChargesRequest(tenant="acme", page_token="!!")),
            "INVALID_ARGUMENT",
            "page_token: not a token from ListCharges in this order",
        ),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="acme", period="2024-12")),
            "NOT_FOUND",
            "no invoice for tenant 'acme' in 2024-12",
        ),
        *(
            ((method, request), "NOT_FOUND", f"unknown tenant 'nobody': {UNKNOWN}")
            for method, request in (
                ("GetUsage", pb.GetUsageRequest(tenant="nobody")),
                ("ListCharges", pb.ListChargesRequest(tenant="nobody")),
                ("GetInvoice", pb.GetInvoiceRequest(tenant="nobody", period="2025-01")),
                ("GetInvoice", pb.GetInvoiceRequest(tenant="nobody")),
                # Not a zero invoice for a misspelt tenant.
                ("ClosePeriod", pb.ClosePeriodRequest(tenant="nobody", period="2024-12")),
            )
        ),
        (
            ("ClosePeriod", pb.ClosePeriodRequest(tenant="acme", period="2025-01")),
            "FAILED_PRECONDITION",
            "period: period 2025-01 runs until 2025-02-01T00:00:00+00:00",
        ),
    ],
)
async def test_refusals_answer_their_status_and_message(
    served: tuple[Billing, pb_grpc.BillingStub], call: tuple[str, object], code: str, details: str
) -> None:
    _, stub = served
    method, request = call
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await getattr(stub, method)(request)
    assert (refused.value.code().name, refused.value.details()) == (code, details)
