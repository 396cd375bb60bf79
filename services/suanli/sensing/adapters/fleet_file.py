"""Reading a fleet YAML file (the parsing and expansion rules live in domain.fleet), seeded with the
measured latency tables (the kernel's suanli.resources.network)."""

from __future__ import annotations

from pathlib import Path

import yaml

from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.resources.network import measured_network
from suanli.sensing.domain.fleet import FleetError, FleetSpec, parse_fleet


def load_fleet(path: Path | str, catalogue: DeviceCatalogue | None = None) -> FleetSpec:
    """Parse and expand ``path``; `FleetError` names the file and the offending entry."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise FleetError(f"{path}: {exc}") from exc
    try:
        return parse_fleet(document, catalogue or default_catalogue(), measured_network())
    except FleetError as exc:
        raise FleetError(f"{path}: {exc}") from None
