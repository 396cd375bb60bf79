"""The YAML job spec: pydantic models in human units, validation with field paths, proto conversion."""

from suanli.jobspec.convert import document_from_proto, from_proto, kind_name, to_document, to_proto
from suanli.jobspec.errors import JobSpecError
from suanli.jobspec.load import load_jobspec, parse_jobspec, validate_document
from suanli.jobspec.model import GpuRequest, JobSpec, Resources, TaskSpec

__all__ = [
    "GpuRequest",
    "JobSpec",
    "JobSpecError",
    "Resources",
    "TaskSpec",
    "document_from_proto",
    "from_proto",
    "kind_name",
    "load_jobspec",
    "parse_jobspec",
    "to_document",
    "to_proto",
    "validate_document",
]
