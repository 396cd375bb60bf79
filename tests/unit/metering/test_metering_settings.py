"""Metering's settings from the environment and flags: defaults, overrides, and errors naming the variable."""

from __future__ import annotations

import re

import pytest

from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.settings import SettingsError

BASE = {"SUANLI_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


@pytest.fixture(autouse=True)
def _no_process_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests pass their environment explicitly; the process's own must not leak in.
    for field in MeteringSettings.model_fields:
        monkeypatch.delenv(MeteringSettings.env_name(field), raising=False)


def test_defaults_and_environment() -> None:
    assert MeteringSettings.load(BASE).batch_max == 500
    settings = MeteringSettings.load(
        {**BASE, "SUANLI_METERING_BATCH_MAX": "50", "SUANLI_METERING_FETCH_WAIT_MS": "20"}
    )
    assert (settings.batch_max, settings.fetch_wait_ms) == (50, 20)
    # A CLI option wins over the environment; one not given (None) leaves it in place.
    assert MeteringSettings.load({**BASE, "SUANLI_METERING_BATCH_MAX": "50"}, batch_max=7).batch_max == 7
    assert MeteringSettings.load({**BASE, "SUANLI_METERING_BATCH_MAX": "50"}, batch_max=None).batch_max == 50


def test_every_variable_keeps_its_name() -> None:
    env = {
        "SUANLI_KAFKA_BOOTSTRAP": " broker:9092 ",
        "SUANLI_TOPIC_PREFIX": "t1",
        "SUANLI_METRICS_PORT": "0",
        "SUANLI_METERING_INTERVAL_S": "0.1",
        "SUANLI_METERING_APP_ID": "app",
        "SUANLI_METERING_LOST_AFTER": "5",
        "SUANLI_METERING_REPUBLISH_S": "30",
        "SUANLI_METERING_BATCH_MAX": "64",
        "SUANLI_METERING_FETCH_WAIT_MS": "25",
    }
    s = MeteringSettings.load(env)
    assert (s.bootstrap, s.topic_prefix, s.metrics_port, s.interval_s, s.app_id) == (
        "broker:9092",
        "t1",
        0,
        0.1,
        "app",
    )
    assert (s.lost_after, s.republish_s, s.batch_max, s.fetch_wait_ms) == (5, 30.0, 64, 25)


def test_the_consumer_group_follows_the_prefix_unless_an_app_id_is_given() -> None:
    assert MeteringSettings.load(BASE).group_id == "suanli-metering"
    assert MeteringSettings.load({**BASE, "SUANLI_TOPIC_PREFIX": "t1"}).group_id == "t1.suanli-metering"
    assert MeteringSettings.load({**BASE, "SUANLI_METERING_APP_ID": "mine"}).group_id == "mine"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SUANLI_METERING_FETCH_WAIT_MS": "0"},
            "SUANLI_METERING_FETCH_WAIT_MS: Input should be greater than 0",
        ),
        ({"SUANLI_METERING_BATCH_MAX": "0"}, "SUANLI_METERING_BATCH_MAX: Input should be greater than 0"),
        ({"SUANLI_METERING_INTERVAL_S": "-1"}, "SUANLI_METERING_INTERVAL_S: Input should be greater than 0"),
        ({"SUANLI_METERING_LOST_AFTER": "0"}, "SUANLI_METERING_LOST_AFTER: Input should be greater than 0"),
        ({"SUANLI_METERING_REPUBLISH_S": "0"}, "SUANLI_METERING_REPUBLISH_S: Input should be greater than 0"),
        ({"SUANLI_METERING_BATCH_MAX": "many"}, "SUANLI_METERING_BATCH_MAX: Input should be a valid integer"),
        ({"SUANLI_KAFKA_BOOTSTRAP": ""}, "SUANLI_KAFKA_BOOTSTRAP is not set"),
        ({"SUANLI_KAFKA_BOOTSTRAP": "  "}, "SUANLI_KAFKA_BOOTSTRAP: String should have at least 1 character"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        MeteringSettings.load({**BASE, **env})
