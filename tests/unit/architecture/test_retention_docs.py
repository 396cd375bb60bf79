"""The retention settings of the event store are documented with their variables and defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.eventstore import RetentionSettings

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


@pytest.mark.parametrize("field", sorted(RetentionSettings.model_fields))
def test_each_retention_setting_has_a_row_with_its_default(field: str) -> None:
    env = RetentionSettings.env_name(field)
    default = RetentionSettings.model_fields[field].get_default()
    shown = str(int(default)) if float(default).is_integer() else str(default)
    rows = [
        line
        for line in OPERATIONS.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{env}` |")
    ]
    assert len(rows) == 1, env
    assert f"default {shown}" in rows[0], rows[0]
