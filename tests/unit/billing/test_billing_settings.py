"""Billing's settings: the variables operators set keep working, flags win, defaults live once, and the
table in docs/billing.md lists every setting with its variable, flag and default."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from suanli.billing.domain.periods import Calendar, PeriodKind
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.data import data_path
from suanli.settings import SettingsError

REQUIRED = {"SUANLI_KAFKA_BOOTSTRAP": "kafka:9092", "SUANLI_PG_DSN": "postgresql://pg/suanli"}


def test_every_variable_operators_set_is_read() -> None:
    settings = BillingSettings.load(
        {
            **REQUIRED,
            "SUANLI_TOPIC_PREFIX": "t1",
            "SUANLI_METRICS_PORT": "9105",
            "SUANLI_BILLING_PRICEBOOK": "/etc/book.yaml",
            "SUANLI_BILLING_SCHEMA": "bil",
            "SUANLI_BILLING_GROUP": "billing-2",
            "SUANLI_BILLING_LISTEN": "127.0.0.1:7000",
            "SUANLI_BILLING_PERIOD": "weekly",
            "SUANLI_BILLING_CLOSE_GRACE_S": "30",
            "SUANLI_BILLING_CLOSE_CHECK_S": "0.5",
            "SUANLI_BILLING_SESSION_TIMEOUT_MS": "6000",
            "SUANLI_BILLING_FETCH_WAIT_MS": "300",
        }
    )
    assert (settings.kafka_bootstrap, settings.pg_dsn, settings.topic_prefix) == (
        "kafka:9092",
        "postgresql://pg/suanli",
        "t1",
    )
    assert (settings.metrics_port, settings.pricebook, settings.db_schema, settings.group) == (
        9105,
        Path("/etc/book.yaml"),
        "bil",
        "billing-2",
    )
    assert (settings.listen, settings.period, settings.close_grace, settings.close_check_s) == (
        "127.0.0.1:7000",
        PeriodKind.WEEKLY,
        timedelta(seconds=30),
        0.5,
    )
    assert (settings.consumer.session_timeout_ms, settings.consumer.heartbeat_interval_ms) == (6000, 600)
    assert settings.consumer.fetch_max_wait_ms == 300


def test_defaults() -> None:
    settings = BillingSettings.load(REQUIRED)
    assert settings.pricebook == data_path("deploy/billing/pricebook.yaml") and settings.pricebook.is_file()
    assert (settings.db_schema, settings.group, settings.listen, settings.period) == (
        "billing",
        "billing",
        "127.0.0.1:50055",
        PeriodKind.MONTHLY,
    )
    assert (settings.topic_prefix, settings.metrics_port) == ("", None)
    assert (settings.close_grace, settings.close_check_s) == (timedelta(minutes=15), 60.0)
    # The consumer's own defaults, as before the settings class: 10 s session, 1 s heartbeat.
    assert (settings.consumer.session_timeout_ms, settings.consumer.heartbeat_interval_ms) == (10_000, 1_000)
    # Longer than the bus's 250 ms: no one waits on a charge, and a parked fetch costs the broker CPU.
    assert settings.consumer.fetch_max_wait_ms == 1_000


def test_a_period_length_names_its_calendar() -> None:
    settings = BillingSettings.load({**REQUIRED, "SUANLI_BILLING_PERIOD": "hourly"})
    assert (settings.period, settings.calendar) == ("1h", Calendar(PeriodKind.FIXED, 60))
    assert BillingSettings.load({**REQUIRED, "SUANLI_BILLING_PERIOD": "2m"}).calendar.minutes == 2
    assert BillingSettings.load(REQUIRED).calendar == Calendar()


def test_flags_win_and_none_means_not_given() -> None:
    env = {**REQUIRED, "SUANLI_BILLING_LISTEN": "0.0.0.0:1", "SUANLI_METRICS_PORT": "9105"}
    settings = BillingSettings.load(env, listen="127.0.0.1:0", metrics_port=None, pricebook=Path("b.yaml"))
    assert (settings.listen, settings.metrics_port, settings.pricebook) == (
        "127.0.0.1:0",
        9105,
        Path("b.yaml"),
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SUANLI_PG_DSN": "x"}, "SUANLI_KAFKA_BOOTSTRAP is not set"),
        ({**REQUIRED, "SUANLI_BILLING_PERIOD": "yearly"}, "SUANLI_BILLING_PERIOD"),
        ({**REQUIRED, "SUANLI_BILLING_PERIOD": "7m"}, "SUANLI_BILLING_PERIOD.*divides a day"),
        ({**REQUIRED, "SUANLI_BILLING_CLOSE_GRACE_S": "soon"}, "SUANLI_BILLING_CLOSE_GRACE_S"),
        ({**REQUIRED, "SUANLI_BILLING_SESSION_TIMEOUT_MS": "0"}, "SUANLI_BILLING_SESSION_TIMEOUT_MS"),
        ({**REQUIRED, "SUANLI_METRICS_PORT": "http"}, "SUANLI_METRICS_PORT"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        BillingSettings.load(env)
