"""What the service layer needs from the outside, as protocols; adapters implement them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from suanli.scheduling.service_layer.projection import Projection


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One event to record: a full record (envelope included). Integration events of the scheduling
    context also go to the outbox; internal (JSON) events and recorded task facts do not."""

    name: str
    record: Mapping[str, Any]
    event_id: UUID
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Append:
    stream: str
    expected_version: int
    events: Sequence[Outgoing]


class Writer(Protocol):
    async def commit(
        self, appends: Sequence[Append], pending: Mapping[str, Mapping[str, Any] | None] | None = None
    ) -> None:
        """Append everything (events and their outbox rows) and upsert/delete pending reasons in one
        transaction, only while this instance holds the leadership (else `NotLeader`)."""
        ...

    async def catch_up(self, projection: Projection) -> None:
        """Apply every event committed after `projection.position`."""
        ...

    async def load_pending(self, projection: Projection) -> None:
        """Make `projection`'s pending reasons the recorded ones (on start, and as a standby follows)."""
        ...


class Metrics(Protocol):
    def cycle(
        self,
        seconds: float,
        placed: int,
        preempted: int,
        pending: Mapping[tuple[str, str], int],
        depth: Mapping[str, int],
    ) -> None: ...

    def placed(self, region: str, latency_s: float) -> None: ...

    def decision(self, outcome: str, count: int = 1) -> None: ...


class NoMetrics:
    def cycle(
        self,
        seconds: float,
        placed: int,
        preempted: int,
        pending: Mapping[tuple[str, str], int],
        depth: Mapping[str, int],
    ) -> None:
        pass

    def placed(self, region: str, latency_s: float) -> None:
        pass

    def decision(self, outcome: str, count: int = 1) -> None:
        pass
