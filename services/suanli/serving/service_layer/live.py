"""Every live service, read page by page: what the gauges and the autoscaler go over each round."""

from __future__ import annotations

from suanli.serving.domain.service import Service
from suanli.serving.service_layer.ports import ServingQueries

_PAGE = 1000


async def live_services(queries: ServingQueries) -> list[Service]:
    found: list[Service] = []
    after: str | None = ""
    while after is not None:
        page = await queries.page(None, after, _PAGE)
        found += [stored.service for stored in page.services]
        after = page.next_after
    return found
