import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_KIND_UNSPECIFIED: _ClassVar[JobKind]
    JOB_KIND_TRAINING: _ClassVar[JobKind]
    JOB_KIND_INFERENCE: _ClassVar[JobKind]
    JOB_KIND_BATCH: _ClassVar[JobKind]

class Locality(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCALITY_UNSPECIFIED: _ClassVar[Locality]
    LOCALITY_ZONE: _ClassVar[Locality]
    LOCALITY_REGION: _ClassVar[Locality]
    LOCALITY_ANY: _ClassVar[Locality]
    LOCALITY_NODE: _ClassVar[Locality]
    LOCALITY_FABRIC: _ClassVar[Locality]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_PENDING: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]
JOB_KIND_UNSPECIFIED: JobKind
JOB_KIND_TRAINING: JobKind
JOB_KIND_INFERENCE: JobKind
JOB_KIND_BATCH: JobKind
LOCALITY_UNSPECIFIED: Locality
LOCALITY_ZONE: Locality
LOCALITY_REGION: Locality
LOCALITY_ANY: Locality
LOCALITY_NODE: Locality
LOCALITY_FABRIC: Locality
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_PENDING: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState

class ResourceRequest(_message.Message):
    __slots__ = ("cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "gpu_models", "node_selector", "regions", "gpu_memory_mib")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    GPU_MODELS_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_milli: int
    gpu_models: _containers.RepeatedScalarFieldContainer[str]
    node_selector: _containers.ScalarMap[str, str]
    regions: _containers.RepeatedScalarFieldContainer[str]
    gpu_memory_mib: int
    def __init__(self, cpu_milli: _Optional[int] = ..., memory_mib: _Optional[int] = ..., gpu_count: _Optional[int] = ..., gpu_milli: _Optional[int] = ..., gpu_models: _Optional[_Iterable[str]] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., regions: _Optional[_Iterable[str]] = ..., gpu_memory_mib: _Optional[int] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("name", "resources", "command", "args", "env", "duration_s", "replicas")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    resources: ResourceRequest
    command: str
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    duration_s: float
    replicas: int
    def __init__(self, name: _Optional[str] = ..., resources: _Optional[_Union[ResourceRequest, _Mapping]] = ..., command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., duration_s: _Optional[float] = ..., replicas: _Optional[int] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("name", "queue", "kind", "priority_class", "preemptible", "best_effort", "min_available", "tasks", "max_retries", "labels", "data_region", "max_rtt_ms", "locality", "min_bandwidth_gbps")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIBLE_FIELD_NUMBER: _ClassVar[int]
    BEST_EFFORT_FIELD_NUMBER: _ClassVar[int]
    MIN_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DATA_REGION_FIELD_NUMBER: _ClassVar[int]
    MAX_RTT_MS_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    MIN_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    kind: JobKind
    priority_class: str
    preemptible: bool
    best_effort: bool
    min_available: int
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    max_retries: int
    labels: _containers.ScalarMap[str, str]
    data_region: str
    max_rtt_ms: float
    locality: Locality
    min_bandwidth_gbps: float
    def __init__(self, name: _Optional[str] = ..., queue: _Optional[str] = ..., kind: _Optional[_Union[JobKind, str]] = ..., priority_class: _Optional[str] = ..., preemptible: _Optional[bool] = ..., best_effort: _Optional[bool] = ..., min_available: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ..., max_retries: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., data_region: _Optional[str] = ..., max_rtt_ms: _Optional[float] = ..., locality: _Optional[_Union[Locality, str]] = ..., min_bandwidth_gbps: _Optional[float] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec", "request_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    request_id: str
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class TaskStatus(_message.Message):
    __slots__ = ("task_id", "state", "node_id", "gpu_indices", "gpu_milli", "attempt", "exit_code", "reason", "region", "rtt_ms", "price_per_hour")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    RTT_MS_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    state: str
    node_id: str
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    gpu_milli: _containers.RepeatedScalarFieldContainer[int]
    attempt: int
    exit_code: int
    reason: str
    region: str
    rtt_ms: float
    price_per_hour: float
    def __init__(self, task_id: _Optional[str] = ..., state: _Optional[str] = ..., node_id: _Optional[str] = ..., gpu_indices: _Optional[_Iterable[int]] = ..., gpu_milli: _Optional[_Iterable[int]] = ..., attempt: _Optional[int] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., region: _Optional[str] = ..., rtt_ms: _Optional[float] = ..., price_per_hour: _Optional[float] = ...) -> None: ...

class PendingReason(_message.Message):
    __slots__ = ("code", "message", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    details: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("id", "spec", "state", "tasks", "pending_reason", "restarts", "submitted_at", "updated_at", "regions", "price_per_hour", "queue_position", "queue_waiting", "estimated_start_at", "estimated_start_note")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAITING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_START_AT_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_START_NOTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    spec: JobSpec
    state: JobState
    tasks: _containers.RepeatedCompositeFieldContainer[TaskStatus]
    pending_reason: PendingReason
    restarts: int
    submitted_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    regions: _containers.RepeatedScalarFieldContainer[str]
    price_per_hour: float
    queue_position: int
    queue_waiting: int
    estimated_start_at: _timestamp_pb2.Timestamp
    estimated_start_note: str
    def __init__(self, id: _Optional[str] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., state: _Optional[_Union[JobState, str]] = ..., tasks: _Optional[_Iterable[_Union[TaskStatus, _Mapping]]] = ..., pending_reason: _Optional[_Union[PendingReason, _Mapping]] = ..., restarts: _Optional[int] = ..., submitted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., regions: _Optional[_Iterable[str]] = ..., price_per_hour: _Optional[float] = ..., queue_position: _Optional[int] = ..., queue_waiting: _Optional[int] = ..., estimated_start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., estimated_start_note: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("queue", "state", "page_size", "page_token", "newest_first")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    queue: str
    state: JobState
    page_size: int
    page_token: str
    newest_first: bool
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: _Optional[bool] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("job_id", "state", "event", "message", "at", "task_id", "attempt")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    event: str
    message: str
    at: _timestamp_pb2.Timestamp
    task_id: str
    attempt: int
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., event: _Optional[str] = ..., message: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("index", "model", "free_milli")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    FREE_MILLI_FIELD_NUMBER: _ClassVar[int]
    index: int
    model: str
    free_milli: int
    def __init__(self, index: _Optional[int] = ..., model: _Optional[str] = ..., free_milli: _Optional[int] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("id", "region", "zone", "status", "cpu_milli", "free_cpu_milli", "memory_mib", "free_memory_mib", "devices", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    FREE_CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    id: str
    region: str
    zone: str
    status: str
    cpu_milli: int
    free_cpu_milli: int
    memory_mib: int
    free_memory_mib: int
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    labels: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., region: _Optional[str] = ..., zone: _Optional[str] = ..., status: _Optional[str] = ..., cpu_milli: _Optional[int] = ..., free_cpu_milli: _Optional[int] = ..., memory_mib: _Optional[int] = ..., free_memory_mib: _Optional[int] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ("region", "page_size", "page_token")
    REGION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    region: str
    page_size: int
    page_token: str
    def __init__(self, region: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes", "next_page_token")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    next_page_token: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ResourceAmount(_message.Message):
    __slots__ = ("flavour", "guaranteed", "maximum", "used", "borrowed", "borrowing_limit", "lending_limit")
    FLAVOUR_FIELD_NUMBER: _ClassVar[int]
    GUARANTEED_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LENDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    flavour: str
    guaranteed: int
    maximum: int
    used: int
    borrowed: int
    borrowing_limit: int
    lending_limit: int
    def __init__(self, flavour: _Optional[str] = ..., guaranteed: _Optional[int] = ..., maximum: _Optional[int] = ..., used: _Optional[int] = ..., borrowed: _Optional[int] = ..., borrowing_limit: _Optional[int] = ..., lending_limit: _Optional[int] = ...) -> None: ...

class Queue(_message.Message):
    __slots__ = ("name", "cohort", "resources", "pending_jobs", "running_jobs", "dominant_share", "stopped")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PENDING_JOBS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    DOMINANT_SHARE_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    name: str
    cohort: str
    resources: _containers.RepeatedCompositeFieldContainer[ResourceAmount]
    pending_jobs: int
    running_jobs: int
    dominant_share: float
    stopped: bool
    def __init__(self, name: _Optional[str] = ..., cohort: _Optional[str] = ..., resources: _Optional[_Iterable[_Union[ResourceAmount, _Mapping]]] = ..., pending_jobs: _Optional[int] = ..., running_jobs: _Optional[int] = ..., dominant_share: _Optional[float] = ..., stopped: _Optional[bool] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues", "next_page_token")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[Queue]
    next_page_token: str
    def __init__(self, queues: _Optional[_Iterable[_Union[Queue, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class QueueSpec(_message.Message):
    __slots__ = ("name", "cohort", "stopped", "quotas")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    cohort: str
    stopped: bool
    quotas: _containers.RepeatedCompositeFieldContainer[QuotaSpec]
    def __init__(self, name: _Optional[str] = ..., cohort: _Optional[str] = ..., stopped: _Optional[bool] = ..., quotas: _Optional[_Iterable[_Union[QuotaSpec, _Mapping]]] = ...) -> None: ...

class QuotaSpec(_message.Message):
    __slots__ = ("flavour", "guaranteed", "maximum", "borrowing_limit", "lending_limit")
    FLAVOUR_FIELD_NUMBER: _ClassVar[int]
    GUARANTEED_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LENDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    flavour: str
    guaranteed: int
    maximum: int
    borrowing_limit: int
    lending_limit: int
    def __init__(self, flavour: _Optional[str] = ..., guaranteed: _Optional[int] = ..., maximum: _Optional[int] = ..., borrowing_limit: _Optional[int] = ..., lending_limit: _Optional[int] = ...) -> None: ...

class CreateQueueRequest(_message.Message):
    __slots__ = ("queue", "request_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    queue: QueueSpec
    request_id: str
    def __init__(self, queue: _Optional[_Union[QueueSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateQueueRequest(_message.Message):
    __slots__ = ("queue", "request_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    queue: QueueSpec
    request_id: str
    def __init__(self, queue: _Optional[_Union[QueueSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteQueueRequest(_message.Message):
    __slots__ = ("name", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteQueueResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PriorityClass(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class ListPriorityClassesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPriorityClassesResponse(_message.Message):
    __slots__ = ("priority_classes",)
    PRIORITY_CLASSES_FIELD_NUMBER: _ClassVar[int]
    priority_classes: _containers.RepeatedCompositeFieldContainer[PriorityClass]
    def __init__(self, priority_classes: _Optional[_Iterable[_Union[PriorityClass, _Mapping]]] = ...) -> None: ...

class DefinePriorityClassRequest(_message.Message):
    __slots__ = ("priority_class", "request_id")
    PRIORITY_CLASS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    priority_class: PriorityClass
    request_id: str
    def __init__(self, priority_class: _Optional[_Union[PriorityClass, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeletePriorityClassRequest(_message.Message):
    __slots__ = ("name", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeletePriorityClassResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ExplainJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class NodeScore(_message.Message):
    __slots__ = ("node_id", "score", "plugin_scores")
    class PluginScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_SCORES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    score: float
    plugin_scores: _containers.ScalarMap[str, float]
    def __init__(self, node_id: _Optional[str] = ..., score: _Optional[float] = ..., plugin_scores: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("job_id", "state", "pending_reason", "top_nodes", "rejected_by_filter", "regions")
    class RejectedByFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    TOP_NODES_FIELD_NUMBER: _ClassVar[int]
    REJECTED_BY_FILTER_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    pending_reason: PendingReason
    top_nodes: _containers.RepeatedCompositeFieldContainer[NodeScore]
    rejected_by_filter: _containers.ScalarMap[str, int]
    regions: _containers.RepeatedCompositeFieldContainer[RegionVerdict]
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., pending_reason: _Optional[_Union[PendingReason, _Mapping]] = ..., top_nodes: _Optional[_Iterable[_Union[NodeScore, _Mapping]]] = ..., rejected_by_filter: _Optional[_Mapping[str, int]] = ..., regions: _Optional[_Iterable[_Union[RegionVerdict, _Mapping]]] = ...) -> None: ...

class RegionVerdict(_message.Message):
    __slots__ = ("region", "verdict")
    REGION_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    region: str
    verdict: str
    def __init__(self, region: _Optional[str] = ..., verdict: _Optional[str] = ...) -> None: ...

class DescribeJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class HistoryEvent(_message.Message):
    __slots__ = ("at", "type", "message", "task_id", "attempt", "node_id", "by", "reason", "exit_code")
    AT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    type: str
    message: str
    task_id: str
    attempt: int
    node_id: str
    by: str
    reason: str
    exit_code: int
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., type: _Optional[str] = ..., message: _Optional[str] = ..., task_id: _Optional[str] = ..., attempt: _Optional[int] = ..., node_id: _Optional[str] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class TaskAttempt(_message.Message):
    __slots__ = ("task_id", "attempt", "node_id", "region", "gpu_indices", "gpu_milli", "placed_at", "started_at", "ended_at", "outcome", "exit_code", "reason", "running_s", "gpu_hours", "price_per_hour")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    PLACED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUNNING_S_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    attempt: int
    node_id: str
    region: str
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    gpu_milli: _containers.RepeatedScalarFieldContainer[int]
    placed_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    outcome: str
    exit_code: int
    reason: str
    running_s: float
    gpu_hours: float
    price_per_hour: float
    def __init__(self, task_id: _Optional[str] = ..., attempt: _Optional[int] = ..., node_id: _Optional[str] = ..., region: _Optional[str] = ..., gpu_indices: _Optional[_Iterable[int]] = ..., gpu_milli: _Optional[_Iterable[int]] = ..., placed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[str] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., running_s: _Optional[float] = ..., gpu_hours: _Optional[float] = ..., price_per_hour: _Optional[float] = ...) -> None: ...

class JobAccounting(_message.Message):
    __slots__ = ("attempts", "wait_s", "elapsed_s", "gpu_hours", "cpu_hours", "cost")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    CPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    wait_s: float
    elapsed_s: float
    gpu_hours: float
    cpu_hours: float
    cost: float
    def __init__(self, attempts: _Optional[int] = ..., wait_s: _Optional[float] = ..., elapsed_s: _Optional[float] = ..., gpu_hours: _Optional[float] = ..., cpu_hours: _Optional[float] = ..., cost: _Optional[float] = ...) -> None: ...

class JobDescription(_message.Message):
    __slots__ = ("job", "events", "attempts", "accounting", "as_of", "queue_position", "queue_waiting")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAITING_FIELD_NUMBER: _ClassVar[int]
    job: Job
    events: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    attempts: _containers.RepeatedCompositeFieldContainer[TaskAttempt]
    accounting: JobAccounting
    as_of: _timestamp_pb2.Timestamp
    queue_position: int
    queue_waiting: int
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., events: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ..., attempts: _Optional[_Iterable[_Union[TaskAttempt, _Mapping]]] = ..., accounting: _Optional[_Union[JobAccounting, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., queue_position: _Optional[int] = ..., queue_waiting: _Optional[int] = ...) -> None: ...

class StreamJobLogsRequest(_message.Message):
    __slots__ = ("job_id", "task", "attempt", "follow")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    task: str
    attempt: int
    follow: bool
    def __init__(self, job_id: _Optional[str] = ..., task: _Optional[str] = ..., attempt: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class JobLogChunk(_message.Message):
    __slots__ = ("task_id", "attempt", "node_id", "data")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    attempt: int
    node_id: str
    data: bytes
    def __init__(self, task_id: _Optional[str] = ..., attempt: _Optional[int] = ..., node_id: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
