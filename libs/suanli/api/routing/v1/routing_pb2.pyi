import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkloadKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKLOAD_KIND_UNSPECIFIED: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_TRAINING: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_INFERENCE: _ClassVar[WorkloadKind]

class LinkStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_STATUS_UNKNOWN: _ClassVar[LinkStatus]
    LINK_STATUS_OK: _ClassVar[LinkStatus]
    LINK_STATUS_DEGRADED: _ClassVar[LinkStatus]
    LINK_STATUS_DOWN: _ClassVar[LinkStatus]

class ExclusionCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXCLUSION_CODE_UNSPECIFIED: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_LINK_DOWN: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_NO_PATH: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_RTT: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_BANDWIDTH: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_GPU_MODEL: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_CAPACITY: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_NO_PRICE: _ClassVar[ExclusionCode]
    EXCLUSION_CODE_PRICE: _ClassVar[ExclusionCode]
WORKLOAD_KIND_UNSPECIFIED: WorkloadKind
WORKLOAD_KIND_TRAINING: WorkloadKind
WORKLOAD_KIND_INFERENCE: WorkloadKind
LINK_STATUS_UNKNOWN: LinkStatus
LINK_STATUS_OK: LinkStatus
LINK_STATUS_DEGRADED: LinkStatus
LINK_STATUS_DOWN: LinkStatus
EXCLUSION_CODE_UNSPECIFIED: ExclusionCode
EXCLUSION_CODE_LINK_DOWN: ExclusionCode
EXCLUSION_CODE_NO_PATH: ExclusionCode
EXCLUSION_CODE_RTT: ExclusionCode
EXCLUSION_CODE_BANDWIDTH: ExclusionCode
EXCLUSION_CODE_GPU_MODEL: ExclusionCode
EXCLUSION_CODE_CAPACITY: ExclusionCode
EXCLUSION_CODE_NO_PRICE: ExclusionCode
EXCLUSION_CODE_PRICE: ExclusionCode

class ResolveRequest(_message.Message):
    __slots__ = ("kind", "from_region", "max_rtt_ms", "min_bandwidth_gbps", "gpu_models", "cu", "max_price_per_hour", "limit", "tenant", "explain")
    KIND_FIELD_NUMBER: _ClassVar[int]
    FROM_REGION_FIELD_NUMBER: _ClassVar[int]
    MAX_RTT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODELS_FIELD_NUMBER: _ClassVar[int]
    CU_FIELD_NUMBER: _ClassVar[int]
    MAX_PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    kind: WorkloadKind
    from_region: str
    max_rtt_ms: float
    min_bandwidth_gbps: float
    gpu_models: _containers.RepeatedScalarFieldContainer[str]
    cu: float
    max_price_per_hour: float
    limit: int
    tenant: str
    explain: int
    def __init__(self, kind: _Optional[_Union[WorkloadKind, str]] = ..., from_region: _Optional[str] = ..., max_rtt_ms: _Optional[float] = ..., min_bandwidth_gbps: _Optional[float] = ..., gpu_models: _Optional[_Iterable[str]] = ..., cu: _Optional[float] = ..., max_price_per_hour: _Optional[float] = ..., limit: _Optional[int] = ..., tenant: _Optional[str] = ..., explain: _Optional[int] = ...) -> None: ...

class Score(_message.Message):
    __slots__ = ("total", "compute", "network", "price")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    total: float
    compute: float
    network: float
    price: float
    def __init__(self, total: _Optional[float] = ..., compute: _Optional[float] = ..., network: _Optional[float] = ..., price: _Optional[float] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("region", "site", "device_class", "gpu_model", "score", "free_cu", "total_cu", "rtt_ms", "loss_ratio", "bandwidth_mbps", "link_status", "price_per_hour", "currency")
    REGION_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    FREE_CU_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CU_FIELD_NUMBER: _ClassVar[int]
    RTT_MS_FIELD_NUMBER: _ClassVar[int]
    LOSS_RATIO_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_MBPS_FIELD_NUMBER: _ClassVar[int]
    LINK_STATUS_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    region: str
    site: str
    device_class: str
    gpu_model: str
    score: Score
    free_cu: float
    total_cu: float
    rtt_ms: float
    loss_ratio: float
    bandwidth_mbps: float
    link_status: LinkStatus
    price_per_hour: float
    currency: str
    def __init__(self, region: _Optional[str] = ..., site: _Optional[str] = ..., device_class: _Optional[str] = ..., gpu_model: _Optional[str] = ..., score: _Optional[_Union[Score, _Mapping]] = ..., free_cu: _Optional[float] = ..., total_cu: _Optional[float] = ..., rtt_ms: _Optional[float] = ..., loss_ratio: _Optional[float] = ..., bandwidth_mbps: _Optional[float] = ..., link_status: _Optional[_Union[LinkStatus, str]] = ..., price_per_hour: _Optional[float] = ..., currency: _Optional[str] = ...) -> None: ...

class Exclusion(_message.Message):
    __slots__ = ("region", "site", "device_class", "code", "reason", "count")
    REGION_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    region: str
    site: str
    device_class: str
    code: ExclusionCode
    reason: str
    count: int
    def __init__(self, region: _Optional[str] = ..., site: _Optional[str] = ..., device_class: _Optional[str] = ..., code: _Optional[_Union[ExclusionCode, str]] = ..., reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ResolveResponse(_message.Message):
    __slots__ = ("candidates", "excluded", "excluded_total")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    excluded: _containers.RepeatedCompositeFieldContainer[Exclusion]
    excluded_total: int
    def __init__(self, candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., excluded: _Optional[_Iterable[_Union[Exclusion, _Mapping]]] = ..., excluded_total: _Optional[int] = ...) -> None: ...

class Link(_message.Message):
    __slots__ = ("link_id", "scope", "src_region", "src_site", "dst_region", "dst_site", "rtt_ms", "baseline_rtt_ms", "jitter_p95_ms", "loss_ratio", "bandwidth_mbps", "status", "reason", "last_probe_at", "rounds")
    LINK_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SRC_REGION_FIELD_NUMBER: _ClassVar[int]
    SRC_SITE_FIELD_NUMBER: _ClassVar[int]
    DST_REGION_FIELD_NUMBER: _ClassVar[int]
    DST_SITE_FIELD_NUMBER: _ClassVar[int]
    RTT_MS_FIELD_NUMBER: _ClassVar[int]
    BASELINE_RTT_MS_FIELD_NUMBER: _ClassVar[int]
    JITTER_P95_MS_FIELD_NUMBER: _ClassVar[int]
    LOSS_RATIO_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_MBPS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_PROBE_AT_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    link_id: str
    scope: str
    src_region: str
    src_site: str
    dst_region: str
    dst_site: str
    rtt_ms: float
    baseline_rtt_ms: float
    jitter_p95_ms: float
    loss_ratio: float
    bandwidth_mbps: float
    status: LinkStatus
    reason: str
    last_probe_at: _timestamp_pb2.Timestamp
    rounds: int
    def __init__(self, link_id: _Optional[str] = ..., scope: _Optional[str] = ..., src_region: _Optional[str] = ..., src_site: _Optional[str] = ..., dst_region: _Optional[str] = ..., dst_site: _Optional[str] = ..., rtt_ms: _Optional[float] = ..., baseline_rtt_ms: _Optional[float] = ..., jitter_p95_ms: _Optional[float] = ..., loss_ratio: _Optional[float] = ..., bandwidth_mbps: _Optional[float] = ..., status: _Optional[_Union[LinkStatus, str]] = ..., reason: _Optional[str] = ..., last_probe_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., rounds: _Optional[int] = ...) -> None: ...

class GetNetworkRequest(_message.Message):
    __slots__ = ("sites",)
    SITES_FIELD_NUMBER: _ClassVar[int]
    sites: bool
    def __init__(self, sites: _Optional[bool] = ...) -> None: ...

class NetworkMatrix(_message.Message):
    __slots__ = ("regions", "region_links", "site_links")
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    REGION_LINKS_FIELD_NUMBER: _ClassVar[int]
    SITE_LINKS_FIELD_NUMBER: _ClassVar[int]
    regions: _containers.RepeatedScalarFieldContainer[str]
    region_links: _containers.RepeatedCompositeFieldContainer[Link]
    site_links: _containers.RepeatedCompositeFieldContainer[Link]
    def __init__(self, regions: _Optional[_Iterable[str]] = ..., region_links: _Optional[_Iterable[_Union[Link, _Mapping]]] = ..., site_links: _Optional[_Iterable[_Union[Link, _Mapping]]] = ...) -> None: ...

class WatchNetworkRequest(_message.Message):
    __slots__ = ("sites", "initial")
    SITES_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    sites: bool
    initial: bool
    def __init__(self, sites: _Optional[bool] = ..., initial: _Optional[bool] = ...) -> None: ...

class LinkUpdate(_message.Message):
    __slots__ = ("link",)
    LINK_FIELD_NUMBER: _ClassVar[int]
    link: Link
    def __init__(self, link: _Optional[_Union[Link, _Mapping]] = ...) -> None: ...

class ResolveReplicaRequest(_message.Message):
    __slots__ = ("service_id", "client_region", "policy", "context_tokens", "generated_tokens", "exclude")
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REGION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    service_id: str
    client_region: str
    policy: str
    context_tokens: int
    generated_tokens: int
    exclude: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, service_id: _Optional[str] = ..., client_region: _Optional[str] = ..., policy: _Optional[str] = ..., context_tokens: _Optional[int] = ..., generated_tokens: _Optional[int] = ..., exclude: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplicaEndpoint(_message.Message):
    __slots__ = ("replica_id", "address", "region", "in_flight", "queued", "expected_latency_s", "rtt_ms")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    RTT_MS_FIELD_NUMBER: _ClassVar[int]
    replica_id: str
    address: str
    region: str
    in_flight: int
    queued: int
    expected_latency_s: float
    rtt_ms: float
    def __init__(self, replica_id: _Optional[str] = ..., address: _Optional[str] = ..., region: _Optional[str] = ..., in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., expected_latency_s: _Optional[float] = ..., rtt_ms: _Optional[float] = ...) -> None: ...

class ResolveReplicaResponse(_message.Message):
    __slots__ = ("replica", "policy", "reason", "expected_latency_s", "home_region", "spilled", "alternatives")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    HOME_REGION_FIELD_NUMBER: _ClassVar[int]
    SPILLED_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    replica: ReplicaEndpoint
    policy: str
    reason: str
    expected_latency_s: float
    home_region: str
    spilled: bool
    alternatives: _containers.RepeatedCompositeFieldContainer[ReplicaEndpoint]
    def __init__(self, replica: _Optional[_Union[ReplicaEndpoint, _Mapping]] = ..., policy: _Optional[str] = ..., reason: _Optional[str] = ..., expected_latency_s: _Optional[float] = ..., home_region: _Optional[str] = ..., spilled: _Optional[bool] = ..., alternatives: _Optional[_Iterable[_Union[ReplicaEndpoint, _Mapping]]] = ...) -> None: ...
