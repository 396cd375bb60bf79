"""Metering's settings, read from the environment once at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from suanli.bus.topics import TOPIC_PREFIX_ENV
from suanli.telemetry import METRICS_PORT_ENV, METRICS_PORTS

KAFKA_ENV = "SUANLI_KAFKA_BOOTSTRAP"
INTERVAL_ENV = "SUANLI_METERING_INTERVAL_S"
APP_ID_ENV = "SUANLI_METERING_APP_ID"
LOST_AFTER_ENV = "SUANLI_METERING_LOST_AFTER"
REPUBLISH_ENV = "SUANLI_METERING_REPUBLISH_S"
BATCH_MAX_ENV = "SUANLI_METERING_BATCH_MAX"
FETCH_WAIT_ENV = "SUANLI_METERING_FETCH_WAIT_MS"


N = TypeVar("N", int, float)


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class MeteringConfig:
    bootstrap: str
    topic_prefix: str = ""
    # How often liveness is checked and the gauges refreshed; Lost itself follows each node's own
    # report interval (lost_after of them without a snapshot).
    interval_s: float = 1.0
    lost_after: int = 3
    republish_s: float = 60.0
    metrics_port: int | None = METRICS_PORTS["metering"]
    app_id: str = ""
    # At most this many records, of those already fetched, are handled as one batch (one broker round
    # trip for all their outputs); a batch never waits for records still to come.
    batch_max: int = 500
    # Tansu answers a fetch only when this wait ends, so an input waits up to this long before it is read;
    # faust's own 1,500 ms made the capacity view ~0.3 s late on average (adapters/transport.py).
    fetch_max_wait_ms: int = 100

    @property
    def group_id(self) -> str:
        # Two deployments sharing a cluster under different prefixes must not share a consumer group.
        return self.app_id or (
            f"{self.topic_prefix}.suanli-metering" if self.topic_prefix else "suanli-metering"
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> MeteringConfig:
        env = os.environ if env is None else env
        bootstrap = env.get(KAFKA_ENV, "").strip()
        if not bootstrap and "bootstrap" not in overrides:
            raise ConfigError(f"{KAFKA_ENV} is not set: where is the Kafka broker?")
        port = env.get(METRICS_PORT_ENV, "").strip()
        values: dict[str, object] = {
            "bootstrap": bootstrap,
            "topic_prefix": env.get(TOPIC_PREFIX_ENV, ""),
            "interval_s": _number(env, INTERVAL_ENV, 1.0, float),
            "lost_after": _number(env, LOST_AFTER_ENV, 3, int),
            "republish_s": _number(env, REPUBLISH_ENV, 60.0, float),
            "metrics_port": int(port) if port else METRICS_PORTS["metering"],
            "app_id": env.get(APP_ID_ENV, ""),
            "batch_max": _number(env, BATCH_MAX_ENV, 500, int),
            "fetch_max_wait_ms": _number(env, FETCH_WAIT_ENV, 100, int),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)  # type: ignore[arg-type]
        if config.interval_s <= 0 or config.lost_after < 1 or config.republish_s <= 0:
            raise ConfigError(f"interval, lost-after and republish must be positive: {config}")
        if config.batch_max < 1 or config.fetch_max_wait_ms < 1:
            raise ConfigError(f"batch size and fetch wait must be positive: {config}")
        return config


def _number(env: Mapping[str, str], name: str, default: N, kind: type[N]) -> N:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
