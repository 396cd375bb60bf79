"""`suanli serve scheduling` settings: defaults once in `SchedulingSettings`, environment, then flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from suanli.scheduling.entrypoints import app as app_module
from suanli.scheduling.entrypoints import cli
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.settings import SettingsError

REQUIRED = {"SUANLI_PG_DSN": "postgresql://db/x", "SUANLI_KAFKA_BOOTSTRAP": "broker:9092"}
# Unset for the CLI runs, so the process environment of whoever runs the tests does not leak in.
UNSET: dict[str, str | None] = {
    name: None for field in SchedulingSettings.model_fields for name in SchedulingSettings.env_names(field)
}


def serve_app() -> typer.Typer:
    """`serve` alone, as the root CLI mounts it (`suanli serve scheduling`)."""
    holder = typer.Typer(add_completion=False)
    holder.command()(cli.serve)
    return holder


def serve_command() -> Any:
    return typer.main.get_command(serve_app())


def test_defaults_come_from_the_settings_class_and_shared_variables_keep_their_names() -> None:
    settings = SchedulingSettings.load(REQUIRED)
    assert settings.dsn == "postgresql://db/x" and settings.bootstrap == "broker:9092"
    assert settings.listen == "127.0.0.1:50051" and settings.policy == "fgdb"
    assert settings.interval_s == 0.5 and settings.reconcile_grace_s == 15.0
    assert settings.store_schema == "scheduling" and settings.queues_path is None
    assert settings.topic_prefix is None and settings.metrics_port is None
    assert len(settings.instance) == 8
    assert SchedulingSettings.env_name("interval_s") == "SUANLI_SCHEDULING_INTERVAL_S"
    assert SchedulingSettings.env_name("topic_prefix") == "SUANLI_TOPIC_PREFIX"
    assert SchedulingSettings.env_name("metrics_port") == "SUANLI_METRICS_PORT"


def test_environment_then_flags() -> None:
    env = {
        **REQUIRED,
        "SUANLI_TOPIC_PREFIX": "t1",
        "SUANLI_METRICS_PORT": "0",
        "SUANLI_SCHEDULING_INTERVAL_S": "0.2",
        "SUANLI_SCHEDULING_POLICY": "spread",
    }
    settings = SchedulingSettings.load(env, policy="bestfit", interval_s=None)
    assert settings.topic_prefix == "t1" and settings.metrics_port == 0
    assert settings.interval_s == 0.2  # a flag that is None was not given
    assert settings.policy == "bestfit"


@pytest.mark.parametrize("from_process", [False, True])
def test_the_services_own_dsn_wins_over_the_shared_one(
    from_process: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each service connects as its own database role (docs/security.md); SUANLI_PG_DSN is the fallback.
    own = {**REQUIRED, "SUANLI_SCHEDULING_PG_DSN": "postgresql://suanli_scheduling@db/x"}
    for env, expected in ((own, own["SUANLI_SCHEDULING_PG_DSN"]), (REQUIRED, REQUIRED["SUANLI_PG_DSN"])):
        if from_process:
            for name, value in {**UNSET, **env}.items():
                if value is None:
                    monkeypatch.delenv(name, raising=False)
                else:
                    monkeypatch.setenv(name, value)
            assert SchedulingSettings.load().dsn == expected
        else:
            assert SchedulingSettings.load(env).dsn == expected
    assert SchedulingSettings.env_names("dsn") == ("SUANLI_SCHEDULING_PG_DSN", "SUANLI_PG_DSN")


def test_an_empty_shared_variable_is_unset() -> None:
    # `suanli up` exports SUANLI_TOPIC_PREFIX="" for "no prefix"; unset leaves the bus to resolve it.
    assert SchedulingSettings.load({**REQUIRED, "SUANLI_TOPIC_PREFIX": ""}).topic_prefix is None


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, "SUANLI_SCHEDULING_PG_DSN or SUANLI_PG_DSN is not set"),
        ({**REQUIRED, "SUANLI_SCHEDULING_INTERVAL_S": "0"}, "SUANLI_SCHEDULING_INTERVAL_S"),
        ({**REQUIRED, "SUANLI_SCHEDULING_DISRUPTION_THRESHOLD": "1.5"}, "DISRUPTION_THRESHOLD"),
        ({**REQUIRED, "SUANLI_SCHEDULING_OVERCOMMIT_RATIO": "0.5"}, "SUANLI_SCHEDULING_OVERCOMMIT_RATIO"),
        ({**REQUIRED, "SUANLI_SCHEDULING_QUEUES_PATH": "/no/such/queues.yaml"}, "QUEUES_PATH"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        SchedulingSettings.load(env)


def test_every_option_is_the_field_of_its_name() -> None:
    options = [p for p in serve_command().params if p.param_type_name == "option"]
    assert options and {o.name for o in options} <= set(SchedulingSettings.model_fields)
    for option in options:
        assert option.default is None, option.name
        assert SchedulingSettings.env_name(str(option.name)) in (option.help or ""), option.name
    help_of = {o.name: o.help or "" for o in options}
    assert "default: 0.5" in help_of["interval_s"] and "required" in help_of["dsn"]


def test_the_command_passes_the_flags_it_was_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[SchedulingSettings] = []

    async def run(settings: SchedulingSettings) -> None:
        ran.append(settings)

    monkeypatch.setattr(app_module, "serve", run)
    queues = tmp_path / "queues.yaml"
    queues.write_text("queues: []\n")
    env: dict[str, Any] = {**UNSET, **REQUIRED, "SUANLI_SCHEDULING_RECONCILE_GRACE_S": "3"}
    argv = ["--queues", str(queues), "--schema", "s1", "--interval", "0.25", "--overcommit", "1.5"]
    result = CliRunner().invoke(serve_app(), argv, env=env)
    assert result.exit_code == 0, result.output
    (settings,) = ran
    assert settings.queues_path == queues and settings.store_schema == "s1"
    assert settings.interval_s == 0.25 and settings.overcommit_ratio == 1.5
    assert settings.reconcile_grace_s == 3.0  # from the environment
    assert settings.listen == "127.0.0.1:50051"  # the default


def test_a_missing_or_bad_setting_is_a_usage_error() -> None:
    result = CliRunner().invoke(serve_app(), [], env=UNSET)
    assert result.exit_code == 2
    assert "SUANLI_SCHEDULING_PG_DSN or SUANLI_PG_DSN is not set" in " ".join(result.output.split())
    result = CliRunner().invoke(serve_app(), ["--disruption-threshold", "2"], env={**UNSET, **REQUIRED})
    assert result.exit_code == 2
    assert "SUANLI_SCHEDULING_DISRUPTION_THRESHOLD" in result.output
