"""docs/scheduler-service.md follows the service outline and its Settings table is the settings class.

On a mismatch the assertion prints the table as it should read, ready to paste into the document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from suanli.scheduling.entrypoints import cli
from suanli.scheduling.entrypoints.settings import SchedulingSettings

DOC = Path(__file__).resolve().parents[3] / "docs" / "scheduler-service.md"
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
HEADER = "| setting | env variable | flag | default | meaning |\n|---|---|---|---|---|"


def flags() -> dict[str, str]:
    """Each option's field (its parameter name) and its flag, as `suanli serve scheduling` takes it."""
    holder = typer.Typer(add_completion=False)
    holder.command()(cli.serve)
    command: Any = typer.main.get_command(holder)
    return {p.name: p.opts[0] for p in command.params if p.param_type_name == "option"}


def expected_table() -> str:
    by_field = flags()
    rows = [HEADER]
    for name, info in SchedulingSettings.model_fields.items():
        default = SchedulingSettings.default_text(name).removeprefix("default: ")
        flag = f"`{by_field[name]}`" if name in by_field else "—"
        env = SchedulingSettings.env_name(name)
        rows.append(f"| `{name}` | `{env}` | {flag} | {default} | {info.description} |")
    return "\n".join(rows)


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no section {title!r}"
    return match.group(1)


def test_the_document_has_the_service_outline_in_order() -> None:
    titles = re.findall(r"^## (.+)$", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    assert titles == OUTLINE


def test_the_settings_table_lists_every_field_with_its_variable_flag_and_default() -> None:
    body = section(DOC.read_text(encoding="utf-8"), "Settings")
    table = "\n".join(line for line in body.splitlines() if line.startswith("|"))
    expected = expected_table()
    assert table == expected, f"docs/scheduler-service.md, Settings, should read:\n\n{expected}\n"
