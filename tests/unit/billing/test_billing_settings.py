"""Billing's settings: the variables operators set keep working, flags win, defaults live once, and the
table in docs/billing.md lists every setting with its variable, flag and default."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import pytest
import typer
from pydantic_core import PydanticUndefined

from suanli.billing.domain.periods import PeriodKind
from suanli.billing.entrypoints.cli import app
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.data import data_path
from suanli.settings import SettingsError

DOC = Path(__file__).parents[3] / "docs" / "billing.md"
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


def test_defaults() -> None:
    settings = BillingSettings.load(REQUIRED)
    assert settings.pricebook == data_path("deploy/billing/pricebook.yaml") and settings.pricebook.is_file()
    assert (settings.db_schema, settings.group, settings.listen, settings.period) == (
        "billing",
        "billing",
        "0.0.0.0:50055",
        PeriodKind.MONTHLY,
    )
    assert (settings.topic_prefix, settings.metrics_port) == ("", None)
    assert (settings.close_grace, settings.close_check_s) == (timedelta(minutes=15), 60.0)
    # The consumer's own defaults, as before the settings class: 10 s session, 1 s heartbeat.
    assert (settings.consumer.session_timeout_ms, settings.consumer.heartbeat_interval_ms) == (10_000, 1_000)


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
        ({**REQUIRED, "SUANLI_BILLING_CLOSE_GRACE_S": "soon"}, "SUANLI_BILLING_CLOSE_GRACE_S"),
        ({**REQUIRED, "SUANLI_BILLING_SESSION_TIMEOUT_MS": "0"}, "SUANLI_BILLING_SESSION_TIMEOUT_MS"),
        ({**REQUIRED, "SUANLI_METRICS_PORT": "http"}, "SUANLI_METRICS_PORT"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        BillingSettings.load(env)


def _doc_table() -> dict[str, dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        setting, env, flag, default, _meaning = (cell.strip() for cell in row.strip("|").split("|"))
        table[setting.strip("`")] = {"env": env.strip("`"), "flag": flag.strip("`"), "default": default}
    return table


def _shown(default: Any) -> str:
    """How the table writes a field's default."""
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, Path):
        return f"`{default.relative_to(data_path('.'))}`"
    if isinstance(default, float) and default.is_integer():
        return f"`{int(default)}`"
    if default == "":
        return '`""`'
    return f"`{default}`"


def test_the_settings_table_lists_every_setting_with_its_variable_and_default() -> None:
    table = _doc_table()
    assert list(table) == list(BillingSettings.model_fields)
    for name, field in BillingSettings.model_fields.items():
        assert table[name]["env"] == BillingSettings.env_name(name), name
        assert table[name]["default"] == _shown(field.default), name


def test_the_settings_table_names_the_flags_of_serve() -> None:
    command = typer.main.get_command(app)
    # A Typer app of one command is that command; the root CLI mounts it as `serve billing`.
    serve = command.commands["serve"] if isinstance(command, click.Group) else command
    typer_own = {"help", "install_completion", "show_completion"}
    flags = {
        opt: param.name
        for param in serve.params
        if param.name not in typer_own
        for opt in param.opts
        if opt.startswith("--")
    }
    documented = {row["flag"]: name for name, row in _doc_table().items() if row["flag"] != "—"}
    assert documented == flags
    assert all(re.fullmatch(r"--[a-z-]+", flag) for flag in documented)
