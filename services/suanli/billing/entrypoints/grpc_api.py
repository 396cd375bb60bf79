"""The `suanli.billing.v1.Billing` gRPC service, with health and reflection."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from suanli.api.billing.v1 import billing_pb2 as pb
from suanli.api.billing.v1 import billing_pb2_grpc as pb_grpc
from suanli.auth import context as auth_context
from suanli.auth.tls import TlsSettings, add_port
from suanli.billing.domain.invoices import Caller, Closing, Invoice
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.domain.periods import CURRENT, PREVIOUS, Calendar, Period
from suanli.billing.domain.rating import SECONDS_PER_HOUR
from suanli.billing.service_layer.billing import BillingService
from suanli.billing.service_layer.errors import InvalidField, InvoiceNotFound, NoInvoiceYet, UnknownTenant
from suanli.billing.service_layer.ports import BillingQueries, UnitOfWork
from suanli.rpc import rpc_errors

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Billing"].full_name
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
CU_HOURS = Decimal("0.000001")


class BillingApi(pb_grpc.BillingServicer):
    """Each RPC validates its request, runs one read or use case, and answers.

    Refusals are raised as `suanli.errors` kinds and turned into their status by `rpc_errors`.
    """

    def __init__(
        self,
        queries: BillingQueries,
        uow: UnitOfWork,
        service: BillingService,
        calendar: Calendar,
        currency: str,
        now: Callable[[], datetime],
    ) -> None:
        self._queries = queries
        self._uow = uow
        self._service = service
        self._calendar = calendar
        self._currency = currency
        self._now = now

    async def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUsageResponse:
        async with rpc_errors(context):
            tenant = await self._tenant(request.tenant)
            period = self._period(request.period or CURRENT)
            rows = await self._queries.usage(tenant, period)
            return pb.GetUsageResponse(
                tenant=tenant,
                period=_period(period),
                currency=self._currency,
                rows=[
                    pb.UsageRow(
                        device_class=r.device_class,
                        region=r.region,
                        cu_hours=_cu_hours(r.cu_seconds),
                        amount=str(r.amount),
                        charges=r.charges,
                    )
                    for r in rows
                ],
                total=str(sum((r.amount for r in rows), Decimal("0.000000"))),
            )

    async def ListCharges(
        self, request: pb.ListChargesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListChargesResponse:
        async with rpc_errors(context):
            tenant = await self._tenant(request.tenant)
            period = self._period(request.period) if request.period else None
            if not 0 <= request.page_size <= MAX_PAGE_SIZE:
                raise InvalidField("page_size", f"must be 0..{MAX_PAGE_SIZE}, got {request.page_size}")
            page = await self._queries.charges(
                tenant,
                billing_period=period,
                job_id=request.job_id or None,
                after=_page_after(request.page_token, request.newest_first),
                limit=request.page_size or DEFAULT_PAGE_SIZE,
                newest_first=request.newest_first,
            )
            token = "" if page.next_after is None else _page_token(page.next_after, request.newest_first)
            return pb.ListChargesResponse(charges=[_charge(b) for b in page.charges], next_page_token=token)

    async def GetInvoice(
        self, request: pb.GetInvoiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Invoice:
        async with rpc_errors(context):
            tenant = await self._tenant(request.tenant)
            if not request.period.strip():
                # The last closed period: the current one can never have an invoice yet.
                latest = await self._queries.latest_invoice(tenant)
                if latest is None:
                    raise NoInvoiceYet(tenant, self._service.close_grace.total_seconds())
                return _invoice(latest)
            period = self._period(request.period)
            invoice = await self._queries.invoice(tenant, period)
            if invoice is None:
                raise InvoiceNotFound(tenant, period)
            return _invoice(invoice)

    async def ClosePeriod(
        self, request: pb.ClosePeriodRequest, context: grpc.aio.ServicerContext
    ) -> pb.Invoice:
        async with rpc_errors(context):
            tenant = await self._tenant(request.tenant)
            # Default: the period that ended last, the only one an operator closes early in practice.
            period = self._period(request.period or PREVIOUS)
            async with self._uow.begin() as unit:
                invoice = await self._service.close_period(unit, tenant, period, self._now(), _closing())
            return _invoice(invoice)

    async def _tenant(self, field: str) -> str:
        """The request's tenant, refused as NOT_FOUND when billing never heard of it.

        A tenant-bound token is the platform's word that its tenant exists (the interceptor already
        checked the request names it), so such a caller gets its tenant's empty answers instead: a new
        tenant's admin sees a zero bill. Operators (platform-wide tokens, or no authentication) asking
        about a misspelt tenant would otherwise get an empty table, or ClosePeriod a zero invoice.
        """
        tenant = _required("tenant", field)
        principal = auth_context.current()
        vouched = principal is not None and not principal.platform_wide and principal.tenant == tenant
        if not vouched and not await self._queries.known_tenant(tenant):
            raise UnknownTenant(tenant)
        return tenant

    def _period(self, label: str) -> Period:
        try:
            return self._calendar.parse(label, self._now())
        except ValueError as exc:
            raise InvalidField("period", str(exc)) from None


def _closing() -> Closing:
    """A close on request, by the caller when authentication is on (the audit trail's `close period`)."""
    principal = auth_context.current()
    caller = None if principal is None else Caller(principal.subject, principal.tenant, principal.token_id)
    return Closing(requested=True, caller=caller)


def _required(field: str, value: str) -> str:
    if not value.strip():
        raise InvalidField(field, "required")
    return value.strip()


# A token names the order it was given in, so one from the other order is refused rather than followed.
_TOKEN_KINDS = {False: "seq", True: "before"}


def _page_token(after: int, newest_first: bool) -> str:
    return base64.urlsafe_b64encode(f"{_TOKEN_KINDS[newest_first]}:{after}".encode()).decode()


def _page_after(token: str, newest_first: bool) -> int:
    if not token:
        return 0
    try:
        kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind != _TOKEN_KINDS[newest_first]:
            raise ValueError(kind)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidField("page_token", "not a token from ListCharges in this order") from None


def _ts(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp


def _period(period: Period) -> pb.Period:
    return pb.Period(label=period.label, start=_ts(period.start), end=_ts(period.end))


def _cu_hours(cu_seconds: Decimal) -> str:
    return str((cu_seconds / SECONDS_PER_HOUR).quantize(CU_HOURS))


def _charge(billed: BilledCharge) -> pb.Charge:
    c = billed.charge
    return pb.Charge(
        charge_id=c.charge_id,
        usage_event_id=c.usage_event_id or "",
        job_id=c.job_id,
        task_id=c.task_id,
        device_class=c.device_class,
        region=c.region,
        tier=c.tier,
        preemptible=c.preemptible,
        window_start=_ts(c.start),
        window_end=_ts(c.end),
        cu_seconds=str(c.cu_seconds),
        cu_hours=str(c.cu_hours),
        unit_price=str(c.unit_price),
        amount=str(c.amount),
        currency=c.currency,
        usage_period=billed.usage_period.label,
        billing_period=billed.billing_period.label,
        adjustment=billed.adjustment,
        reverses_charge_id=c.reverses or "",
    )


def _invoice(invoice: Invoice) -> pb.Invoice:
    return pb.Invoice(
        invoice_id=invoice.invoice_id,
        tenant=invoice.tenant,
        period=_period(invoice.period),
        currency=invoice.currency,
        total=str(invoice.total),
        lines=[
            pb.InvoiceLine(
                device_class=ln.device_class,
                description=ln.description,
                quantity=str(ln.cu_hours),
                unit=ln.unit,
                amount=str(ln.amount),
                adjustment_of=ln.adjustment_of or "",
            )
            for ln in invoice.lines
        ],
        issued_at=_ts(invoice.issued_at),
    )


async def start_server(
    api: BillingApi,
    address: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsSettings | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve Billing, health and reflection on `address` (port 0 picks one); returns the bound port.

    `interceptors`: the kernel's `AuthInterceptor` when authentication is on (docs/security.md); `tls`: the
    service's TLS settings (`suanli.auth.tls`; None or unset: plaintext).
    """
    server = grpc.aio.server(interceptors=interceptors)
    register: Callable[[BillingApi, grpc.aio.Server], None] = pb_grpc.add_BillingServicer_to_server
    register(api, server)  # the generated function is untyped; this says what it takes
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = add_port(server, address, tls)
    if port == 0:
        raise OSError(f"cannot bind gRPC address {address}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port
