"""Reading a spec from YAML text or a file, with problems reported as `JobSpecError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from suanli.jobspec.errors import JobSpecError, problems_of
from suanli.jobspec.model import JobSpec


def _yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise JobSpecError([f"{where}not valid YAML: {exc.problem}"], source) from None
    except yaml.YAMLError as exc:
        raise JobSpecError([f"not valid YAML: {exc}"], source) from None


def validate_document(document: Any, *, source: str = "", queue: str | None = None) -> JobSpec:
    """Validate a parsed document; `queue`, when given, replaces the document's queue (`--queue`)."""
    if queue is not None and isinstance(document, dict):
        document = {**document, "queue": queue}
    try:
        return JobSpec.model_validate(document)
    except ValidationError as exc:
        raise JobSpecError(problems_of(exc), source) from None


def parse_jobspec(text: str, *, source: str = "", queue: str | None = None) -> JobSpec:
    """A spec from YAML text; `queue` replaces or supplies the queue; `JobSpecError` lists every problem."""
    return validate_document(_yaml(text, source), source=source, queue=queue)


def load_jobspec(path: str | Path, *, queue: str | None = None) -> JobSpec:
    """A spec from a YAML file, as `parse_jobspec` reads it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobSpecError([f"cannot read: {exc.strerror or exc}"], str(path)) from None
    return parse_jobspec(text, source=str(path), queue=queue)
