"""Who a node is and where it sits: the fields every sensing event repeats."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    node_id: str
    region: str
    zone: str
    site: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("node_id", "region", "zone", "site"):
            if not getattr(self, name):
                raise ValueError(f"node identity needs a non-empty {name}")

    @property
    def producer(self) -> str:
        """The envelope's producer name, one per agent."""
        return f"sensing/{self.node_id}"
