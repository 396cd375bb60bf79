"""Deterministic event ids: the same input events always yield the same output ids.

Downstream consumers de-duplicate by ``event_id``, so a replay after a crash or a repeated input event
re-emits records they already have instead of new charges.
"""

from __future__ import annotations

import uuid
from typing import Final

NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "https://suanli.dev/metering")


def derived_id(*parts: object) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in parts)))
