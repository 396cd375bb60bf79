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
from suanli.billing.domain.periods import Calendar
from suanli.billing.entrypoints.grpc_api import BillingApi, start_server


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


@pytest.mark.parametrize(
    ("call", "code", "details"),
    [
        (("GetUsage", pb.GetUsageRequest(tenant=" ")), "INVALID_ARGUMENT", "tenant: required"),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="acme", period="January")),
            "INVALID_ARGUMENT",
            "period: period must look like YYYY-MM or YYYY-MM-DD, got 'January'",
        ),
        (("GetInvoice", pb.GetInvoiceRequest(tenant="acme")), "INVALID_ARGUMENT", "period: required"),
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
            "page_token: not a token from ListCharges",
        ),
        (
            ("ListCharges", pb.ListChargesRequest(tenant="acme", page_token="!!")),
            "INVALID_ARGUMENT",
            "page_token: not a token from ListCharges",
        ),
        (
            ("GetInvoice", pb.GetInvoiceRequest(tenant="nobody", period="2025-01")),
            "NOT_FOUND",
            "no invoice for tenant 'nobody' in 2025-01",
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
