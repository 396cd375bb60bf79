"""Every service's document follows the one outline, and its Settings table is what the code reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import typer

from suanli.billing.entrypoints import cli as billing_cli
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.infra.testing import service_doc_problems
from suanli.metering.entrypoints import cli as metering_cli
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.routing.entrypoints import cli as routing_cli
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.scheduling.entrypoints import cli as scheduling_cli
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.sensing.entrypoints import cli as sensing_cli
from suanli.sensing.entrypoints.settings import SensingSettings
from suanli.serving.entrypoints import cli as serving_cli
from suanli.serving.entrypoints.settings import ServingSettings

DOCS = Path(__file__).resolve().parents[3] / "docs"

# service: (its document, its settings, its command line's Typer app, the command that runs it, the
# command's options that are not settings)
SERVICES: dict[str, tuple[str, type[Any], typer.Typer, str, frozenset[str]]] = {
    "sensing": (
        "sensing.md",
        SensingSettings,
        sensing_cli.app,
        "agent",
        frozenset({"--simulate", "--once", "--verbose", "-v"}),
    ),
    "metering": ("metering.md", MeteringSettings, metering_cli.app, "serve", frozenset({"--loglevel"})),
    "routing": ("routing.md", RoutingSettings, routing_cli.app, "serve", frozenset({"--loglevel"})),
    "scheduling": ("scheduler-service.md", SchedulingSettings, scheduling_cli.app, "serve", frozenset()),
    "billing": ("billing.md", BillingSettings, billing_cli.app, "serve", frozenset()),
    "serving": ("serving.md", ServingSettings, serving_cli.app, "serve", frozenset()),
}


def _command(app: typer.Typer, name: str) -> click.Command:
    command = typer.main.get_command(app)
    # A Typer app of one command is that command; the root CLI mounts it (`suanli serve <service>`).
    return command.commands[name] if isinstance(command, click.Group) else command


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_the_service_document_has_the_outline_and_a_true_settings_table(service: str) -> None:
    doc, settings, app, name, not_settings = SERVICES[service]
    assert service_doc_problems(DOCS / doc, settings, _command(app, name), not_settings) == []


def test_a_wrong_row_is_caught(tmp_path: Path) -> None:
    doc, settings, app, name, not_settings = SERVICES["metering"]
    text = (DOCS / doc).read_text(encoding="utf-8")
    broken = tmp_path / doc
    broken.write_text(
        text.replace("`SUANLI_METERING_BATCH_MAX`", "`SUANLI_METERING_BATCH`"), encoding="utf-8"
    )
    problems = service_doc_problems(broken, settings, _command(app, name), not_settings)
    assert problems == [
        f"{doc}: batch_max: variable 'SUANLI_METERING_BATCH', the code reads 'SUANLI_METERING_BATCH_MAX'"
    ]


def test_an_undocumented_option_is_caught(tmp_path: Path) -> None:
    doc, settings, app, name, _ = SERVICES["metering"]
    problems = service_doc_problems(DOCS / doc, settings, _command(app, name), frozenset())
    assert problems == [f"{doc}: options ['--loglevel'] are neither in the Settings table nor not_settings"]


def test_a_missing_section_is_caught(tmp_path: Path) -> None:
    doc, settings, app, name, not_settings = SERVICES["billing"]
    broken = tmp_path / doc
    broken.write_text((DOCS / doc).read_text(encoding="utf-8").replace("## Metrics\n", "## Numbers\n"))
    problems = service_doc_problems(broken, settings, _command(app, name), not_settings)
    assert len(problems) == 1 and "do not start with" in problems[0]
