"""Metering's settings from the environment: defaults, overrides, and clear errors for bad values."""

from __future__ import annotations

import pytest

from suanli.metering.entrypoints.config import ConfigError, MeteringConfig

BASE = {"SUANLI_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


def test_defaults_and_environment() -> None:
    assert MeteringConfig.from_env(BASE).batch_max == 500
    config = MeteringConfig.from_env(
        {**BASE, "SUANLI_METERING_BATCH_MAX": "50", "SUANLI_METERING_FETCH_WAIT_MS": "20"}
    )
    assert (config.batch_max, config.fetch_max_wait_ms) == (50, 20)
    # A CLI option wins over the environment.
    assert MeteringConfig.from_env({**BASE, "SUANLI_METERING_BATCH_MAX": "50"}, batch_max=7).batch_max == 7


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SUANLI_METERING_FETCH_WAIT_MS": "0"}, "must be positive"),
        ({"SUANLI_METERING_BATCH_MAX": "many"}, "SUANLI_METERING_BATCH_MAX='many' is not a number"),
        ({"SUANLI_KAFKA_BOOTSTRAP": ""}, "SUANLI_KAFKA_BOOTSTRAP is not set"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        MeteringConfig.from_env({**BASE, **env})
