"""The run-time faults file of a simulated fleet (`suanli agent --simulate FLEET --faults FILE`).

Read again before every probe round, so a test, the demo or a benchmark scripts faults by writing the file
while the fleet runs. A missing or empty file is no faults; a file that does not parse or validate is
logged (once per distinct error) and the faults read last stay in force: a typo never stops the fleet.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from suanli.sensing.domain.faults import Fault, FaultError, parse_faults
from suanli.sensing.domain.fleet import FleetSpec

log = logging.getLogger(__name__)


def parse_faults_document(document: Any, fleet: FleetSpec) -> tuple[Fault, ...]:
    """A faults file's content: a list of faults, or a mapping with a ``faults`` list (like a fleet file)."""
    if isinstance(document, dict):
        unknown = sorted(str(k) for k in document if k != "faults")
        if unknown:
            raise FaultError(f"unknown top-level field {unknown[0]!r} (expected faults)")
        document = document.get("faults")
    return parse_faults(document, regions=fleet.regions, sites=[s.site for s in fleet.sites])


def load_faults(path: Path, fleet: FleetSpec) -> tuple[Fault, ...]:
    """The faults in ``path`` (none when it does not exist); `FaultError` names the file and entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise FaultError(f"{path}: {exc}") from None
    try:
        return parse_faults_document(yaml.safe_load(text), fleet)
    except yaml.YAMLError as exc:
        raise FaultError(f"{path}: not YAML: {' '.join(str(exc).split())}") from None
    except FaultError as exc:
        raise FaultError(f"{path}: {exc}") from None


class FaultsFile:
    """The faults currently in ``path``; the last valid content while the file is invalid."""

    def __init__(self, path: Path, fleet: FleetSpec) -> None:
        self.path = path
        self._fleet = fleet
        self._faults: tuple[Fault, ...] = ()
        self._last_error: str | None = None

    def current(self) -> tuple[Fault, ...]:
        try:
            faults = load_faults(self.path, self._fleet)
        except FaultError as exc:
            if str(exc) != self._last_error:
                log.error("ignoring the faults file, keeping the faults read before: %s", exc)
                self._last_error = str(exc)
            return self._faults
        if faults != self._faults:
            log.info("faults file %s: %d fault(s) scripted", self.path, len(faults))
        self._faults, self._last_error = faults, None
        return faults
