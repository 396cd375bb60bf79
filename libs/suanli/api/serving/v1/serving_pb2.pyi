import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateServiceRequest(_message.Message):
    __slots__ = ("queue", "spec", "replicas")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    spec: str
    replicas: int
    def __init__(self, queue: _Optional[str] = ..., spec: _Optional[str] = ..., replicas: _Optional[int] = ...) -> None: ...

class GetServiceRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListServicesRequest(_message.Message):
    __slots__ = ("tenant", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListServicesResponse(_message.Message):
    __slots__ = ("services", "next_page_token")
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[Service]
    next_page_token: str
    def __init__(self, services: _Optional[_Iterable[_Union[Service, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ScaleServiceRequest(_message.Message):
    __slots__ = ("tenant", "name", "replicas")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    replicas: int
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., replicas: _Optional[int] = ...) -> None: ...

class DeleteServiceRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class WatchServiceRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ServiceUpdate(_message.Message):
    __slots__ = ("event", "service")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    event: str
    service: Service
    def __init__(self, event: _Optional[str] = ..., service: _Optional[_Union[Service, _Mapping]] = ...) -> None: ...

class Replica(_message.Message):
    __slots__ = ("replica_id", "state", "job_id", "guaranteed", "pinned_region", "node_id", "region", "site", "attempt", "load")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GUARANTEED_FIELD_NUMBER: _ClassVar[int]
    PINNED_REGION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    replica_id: str
    state: str
    job_id: str
    guaranteed: bool
    pinned_region: str
    node_id: str
    region: str
    site: str
    attempt: int
    load: ReplicaLoad
    def __init__(self, replica_id: _Optional[str] = ..., state: _Optional[str] = ..., job_id: _Optional[str] = ..., guaranteed: _Optional[bool] = ..., pinned_region: _Optional[str] = ..., node_id: _Optional[str] = ..., region: _Optional[str] = ..., site: _Optional[str] = ..., attempt: _Optional[int] = ..., load: _Optional[_Union[ReplicaLoad, _Mapping]] = ...) -> None: ...

class ReplicaLoad(_message.Message):
    __slots__ = ("in_flight", "queued", "recent_latency_s", "prefill_backlog_s", "kv_free_tokens", "address", "reported_at")
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RECENT_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    PREFILL_BACKLOG_S_FIELD_NUMBER: _ClassVar[int]
    KV_FREE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REPORTED_AT_FIELD_NUMBER: _ClassVar[int]
    in_flight: int
    queued: int
    recent_latency_s: float
    prefill_backlog_s: float
    kv_free_tokens: int
    address: str
    reported_at: _timestamp_pb2.Timestamp
    def __init__(self, in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., recent_latency_s: _Optional[float] = ..., prefill_backlog_s: _Optional[float] = ..., kv_free_tokens: _Optional[int] = ..., address: _Optional[str] = ..., reported_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Service(_message.Message):
    __slots__ = ("service_id", "tenant", "queue", "name", "model", "state", "desired_replicas", "min_replicas", "max_replicas", "placed_replicas", "replicas", "spec", "created_at", "updated_at")
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DESIRED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MIN_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PLACED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    service_id: str
    tenant: str
    queue: str
    name: str
    model: str
    state: str
    desired_replicas: int
    min_replicas: int
    max_replicas: int
    placed_replicas: int
    replicas: _containers.RepeatedCompositeFieldContainer[Replica]
    spec: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, service_id: _Optional[str] = ..., tenant: _Optional[str] = ..., queue: _Optional[str] = ..., name: _Optional[str] = ..., model: _Optional[str] = ..., state: _Optional[str] = ..., desired_replicas: _Optional[int] = ..., min_replicas: _Optional[int] = ..., max_replicas: _Optional[int] = ..., placed_replicas: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[Replica, _Mapping]]] = ..., spec: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExplainServiceRequest(_message.Message):
    __slots__ = ("tenant", "name", "limit")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    limit: int
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ExplainServiceResponse(_message.Message):
    __slots__ = ("service_id", "tenant", "name", "policy", "desired_replicas", "decisions")
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DESIRED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    service_id: str
    tenant: str
    name: str
    policy: str
    desired_replicas: int
    decisions: _containers.RepeatedCompositeFieldContainer[ScaleDecision]
    def __init__(self, service_id: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., policy: _Optional[str] = ..., desired_replicas: _Optional[int] = ..., decisions: _Optional[_Iterable[_Union[ScaleDecision, _Mapping]]] = ...) -> None: ...

class ScalerInputs(_message.Message):
    __slots__ = ("ready", "starting", "concurrency", "queued", "arrivals", "interval_s", "mean_context", "mean_generated")
    READY_FIELD_NUMBER: _ClassVar[int]
    STARTING_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    ARRIVALS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    MEAN_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MEAN_GENERATED_FIELD_NUMBER: _ClassVar[int]
    ready: int
    starting: int
    concurrency: float
    queued: int
    arrivals: int
    interval_s: float
    mean_context: float
    mean_generated: float
    def __init__(self, ready: _Optional[int] = ..., starting: _Optional[int] = ..., concurrency: _Optional[float] = ..., queued: _Optional[int] = ..., arrivals: _Optional[int] = ..., interval_s: _Optional[float] = ..., mean_context: _Optional[float] = ..., mean_generated: _Optional[float] = ...) -> None: ...

class ModelFigure(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class ScaleDecision(_message.Message):
    __slots__ = ("decided_at", "autoscaler", "from_replicas", "to_replicas", "changed", "reason", "inputs", "model", "current")
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    AUTOSCALER_FIELD_NUMBER: _ClassVar[int]
    FROM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    TO_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    decided_at: _timestamp_pb2.Timestamp
    autoscaler: str
    from_replicas: int
    to_replicas: int
    changed: bool
    reason: str
    inputs: ScalerInputs
    model: _containers.RepeatedCompositeFieldContainer[ModelFigure]
    current: int
    def __init__(self, decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., autoscaler: _Optional[str] = ..., from_replicas: _Optional[int] = ..., to_replicas: _Optional[int] = ..., changed: _Optional[bool] = ..., reason: _Optional[str] = ..., inputs: _Optional[_Union[ScalerInputs, _Mapping]] = ..., model: _Optional[_Iterable[_Union[ModelFigure, _Mapping]]] = ..., current: _Optional[int] = ...) -> None: ...
