import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Period(_message.Message):
    __slots__ = ("label", "start", "end")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    label: str
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    def __init__(self, label: _Optional[str] = ..., start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("tenant", "period")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    period: str
    def __init__(self, tenant: _Optional[str] = ..., period: _Optional[str] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ("device_class", "region", "cu_hours", "amount", "charges")
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    CU_HOURS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CHARGES_FIELD_NUMBER: _ClassVar[int]
    device_class: str
    region: str
    cu_hours: str
    amount: str
    charges: int
    def __init__(self, device_class: _Optional[str] = ..., region: _Optional[str] = ..., cu_hours: _Optional[str] = ..., amount: _Optional[str] = ..., charges: _Optional[int] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("tenant", "period", "currency", "rows", "total")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    period: Period
    currency: str
    rows: _containers.RepeatedCompositeFieldContainer[UsageRow]
    total: str
    def __init__(self, tenant: _Optional[str] = ..., period: _Optional[_Union[Period, _Mapping]] = ..., currency: _Optional[str] = ..., rows: _Optional[_Iterable[_Union[UsageRow, _Mapping]]] = ..., total: _Optional[str] = ...) -> None: ...

class ListChargesRequest(_message.Message):
    __slots__ = ("tenant", "period", "job_id", "page_size", "page_token", "newest_first")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    period: str
    job_id: str
    page_size: int
    page_token: str
    newest_first: bool
    def __init__(self, tenant: _Optional[str] = ..., period: _Optional[str] = ..., job_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: _Optional[bool] = ...) -> None: ...

class Charge(_message.Message):
    __slots__ = ("charge_id", "usage_event_id", "job_id", "task_id", "device_class", "region", "tier", "preemptible", "window_start", "window_end", "cu_seconds", "cu_hours", "unit_price", "amount", "currency", "usage_period", "billing_period", "adjustment", "reverses_charge_id")
    CHARGE_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIBLE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_FIELD_NUMBER: _ClassVar[int]
    CU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CU_HOURS_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    USAGE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    BILLING_PERIOD_FIELD_NUMBER: _ClassVar[int]
    ADJUSTMENT_FIELD_NUMBER: _ClassVar[int]
    REVERSES_CHARGE_ID_FIELD_NUMBER: _ClassVar[int]
    charge_id: str
    usage_event_id: str
    job_id: str
    task_id: str
    device_class: str
    region: str
    tier: str
    preemptible: bool
    window_start: _timestamp_pb2.Timestamp
    window_end: _timestamp_pb2.Timestamp
    cu_seconds: str
    cu_hours: str
    unit_price: str
    amount: str
    currency: str
    usage_period: str
    billing_period: str
    adjustment: bool
    reverses_charge_id: str
    def __init__(self, charge_id: _Optional[str] = ..., usage_event_id: _Optional[str] = ..., job_id: _Optional[str] = ..., task_id: _Optional[str] = ..., device_class: _Optional[str] = ..., region: _Optional[str] = ..., tier: _Optional[str] = ..., preemptible: _Optional[bool] = ..., window_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cu_seconds: _Optional[str] = ..., cu_hours: _Optional[str] = ..., unit_price: _Optional[str] = ..., amount: _Optional[str] = ..., currency: _Optional[str] = ..., usage_period: _Optional[str] = ..., billing_period: _Optional[str] = ..., adjustment: _Optional[bool] = ..., reverses_charge_id: _Optional[str] = ...) -> None: ...

class ListChargesResponse(_message.Message):
    __slots__ = ("charges", "next_page_token")
    CHARGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    charges: _containers.RepeatedCompositeFieldContainer[Charge]
    next_page_token: str
    def __init__(self, charges: _Optional[_Iterable[_Union[Charge, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetInvoiceRequest(_message.Message):
    __slots__ = ("tenant", "period")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    period: str
    def __init__(self, tenant: _Optional[str] = ..., period: _Optional[str] = ...) -> None: ...

class ClosePeriodRequest(_message.Message):
    __slots__ = ("tenant", "period")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    period: str
    def __init__(self, tenant: _Optional[str] = ..., period: _Optional[str] = ...) -> None: ...

class InvoiceLine(_message.Message):
    __slots__ = ("device_class", "description", "quantity", "unit", "amount", "adjustment_of")
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    ADJUSTMENT_OF_FIELD_NUMBER: _ClassVar[int]
    device_class: str
    description: str
    quantity: str
    unit: str
    amount: str
    adjustment_of: str
    def __init__(self, device_class: _Optional[str] = ..., description: _Optional[str] = ..., quantity: _Optional[str] = ..., unit: _Optional[str] = ..., amount: _Optional[str] = ..., adjustment_of: _Optional[str] = ...) -> None: ...

class Invoice(_message.Message):
    __slots__ = ("invoice_id", "tenant", "period", "currency", "total", "lines", "issued_at")
    INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    invoice_id: str
    tenant: str
    period: Period
    currency: str
    total: str
    lines: _containers.RepeatedCompositeFieldContainer[InvoiceLine]
    issued_at: _timestamp_pb2.Timestamp
    def __init__(self, invoice_id: _Optional[str] = ..., tenant: _Optional[str] = ..., period: _Optional[_Union[Period, _Mapping]] = ..., currency: _Optional[str] = ..., total: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[InvoiceLine, _Mapping]]] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
