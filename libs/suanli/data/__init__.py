"""Files the platform reads at run time: Avro schemas, default fleets, queues, price book, openb nodes.

They live once in the repository (``schemas/``, ``deploy/``, ``traces/``); this package reaches them
through links in a source checkout and carries copies of them in a built wheel, so the same
``data_path("deploy/fleets/small.yaml")`` works in both. ``SUANLI_DATA_DIR`` points at another tree
with the same layout (an operator's own deploy files, a container image's).
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

DATA_DIR_ENV = "SUANLI_DATA_DIR"


def data_root() -> Path:
    """The tree holding ``schemas/``, ``deploy/`` and ``traces/``: the setting if given, else this package."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return _packaged_root()


@functools.cache
def _packaged_root() -> Path:
    # Resolving a package's files costs ~16 us; codecs reach the schemas on every encode and decode.
    return Path(str(resources.files(__name__)))


def data_path(relative: str) -> Path:
    """A file or folder of the platform's data, e.g. ``data_path("schemas/avro")``."""
    return data_root() / relative
