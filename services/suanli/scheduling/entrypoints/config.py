"""Settings of `suanli serve scheduling`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SchedulingConfig:
    dsn: str
    bootstrap: str
    queues_path: Path | None = None  # YAML; applied by the leader when it is elected
    schema: str = "scheduling"  # event store schema
    topic_prefix: str | None = None  # None: SUANLI_TOPIC_PREFIX
    listen: str = "127.0.0.1:50051"
    policy: str = "fgdb"
    seed: int = 0
    interval_s: float = 0.5
    reconcile_grace_s: float = 15.0
    # Lost fraction of the fleet at or above which evictions are held (see service_layer/disruption.py).
    disruption_threshold: float = 0.75
    standby_poll_s: float = 0.5
    topic_check_s: float = 5.0
    overcommit_ratio: float = 1.0
    metrics_port: int | None = None
    instance: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
