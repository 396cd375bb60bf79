"""Suanli (算力): compute-power scheduling platform.

The shared kernel lives in ``libs/suanli`` and the services in ``services/suanli``; both are one
import namespace, ``suanli``. The services root is joined to this package's path here so that
``suanli.scheduling`` and ``suanli.bus`` import alike from an editable install of the clone.
"""

from __future__ import annotations

from pathlib import Path

_SERVICES = Path(__file__).resolve().parents[2] / "services" / "suanli"
if _SERVICES.is_dir() and str(_SERVICES) not in __path__:
    __path__.append(str(_SERVICES))

REPO_ROOT = Path(__file__).resolve().parents[2]
