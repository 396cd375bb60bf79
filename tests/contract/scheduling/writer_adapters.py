"""What the writer contract fixtures yield (a module of its own: test modules import it by name)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suanli.eventstore import EventStore
from suanli.scheduling.adapters.store import StoreWriter
from suanli.scheduling.service_layer.errors import NotLeader


class Fenced:
    """A fence that can be told this instance was deposed."""

    def __init__(self) -> None:
        self.leader = True

    async def check(self, conn: Any) -> None:
        if not self.leader:
            raise NotLeader("deposed")


@dataclass
class WriterUnderTest:
    writer: StoreWriter
    store: EventStore
    fence: Fenced
