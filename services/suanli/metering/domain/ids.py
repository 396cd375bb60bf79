"""Deterministic event ids: the same input events always yield the same output ids.

Downstream consumers de-duplicate by ``event_id``, so a replay after a crash or a repeated input event
re-emits records they already have instead of new charges.
"""

from __future__ import annotations

from typing import Final

from suanli.clock import name_id, url_namespace

NAMESPACE: Final = url_namespace("https://suanli.dev/metering")


def derived_id(*parts: object) -> str:
    """The id of the record derived from ``parts`` (the same parts, the same id)."""
    return name_id(NAMESPACE, "/".join(str(p) for p in parts))
