"""docs/routing.md follows the service outline, and its Settings table says what the code does."""

from __future__ import annotations

from pathlib import Path

import click
import typer

from suanli.routing.entrypoints import cli
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.telemetry.names import METRICS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "routing.md"
OUTLINE = [
    "What it owns",
    "Events in",
    "Events out",
    "RPCs",
    "Settings",
    "Metrics",
    "Failure behaviour",
    "Design notes",
]


def test_the_docs_follow_the_service_outline() -> None:
    headings = [line[3:].strip() for line in DOCS.read_text().splitlines() if line.startswith("## ")]
    assert headings == OUTLINE


def _settings_table() -> dict[str, tuple[str, str, str]]:
    section = DOCS.read_text().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] not in ("setting", "") and not set(cells[0]) <= {"-", ":"}:
            rows[cells[0]] = (cells[1], cells[2], cells[3])
    return rows


def test_the_docs_list_every_setting_with_its_variable_flag_and_default() -> None:
    table = _settings_table()
    assert set(table) == set(RoutingSettings.model_fields)
    command = typer.main.get_command(cli.app)
    serve = command.commands["serve"] if isinstance(command, click.Group) else command
    flags = {opt for param in serve.params for opt in param.opts}
    for name, field in RoutingSettings.model_fields.items():
        env, flag, default = table[name]
        assert env == RoutingSettings.env_name(name), name
        if field.is_required():
            assert default == "required", name
        elif name == "pricebook":
            assert str(field.default).endswith(default), name
        else:
            assert default == ('""' if field.default == "" else str(field.default)), name
        assert flag == "—" or flag in flags, (name, flag)


def test_the_docs_list_routings_metrics() -> None:
    text = DOCS.read_text()
    assert [m.name for m in METRICS if m.exporter == "routing" and f"`{m.name}" not in text] == []
