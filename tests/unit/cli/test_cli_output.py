"""The rows helper every `suanli bill` command prints through: CSV that parses back to the rows, plain
tables never cut when piped, JSON/YAML of the whole answer."""

from __future__ import annotations

import csv
import io
import json

import pytest
import yaml

from suanli.cli import output
from suanli.cli.output import Rows, RowsFormat, emit_rows, rows_csv

ROWS = Rows(
    ("device_class", "description", "amount"),
    [("h200", "h200 compute, cn-east", "18.000000"), ("cpu", 'a "quoted" line', "0.016875")],
    "acme usage 2025-01: 18.016875 CNY",
    frozenset({"amount"}),
)
DATA = {"tenant": "acme", "rows": [{"amount": "18.000000"}]}


def test_csv_parses_back_to_the_rows() -> None:
    parsed = list(csv.reader(io.StringIO(rows_csv(ROWS))))
    assert parsed == [list(ROWS.columns), *map(list, ROWS.rows)]


def test_each_format_writes_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    emit_rows(RowsFormat.CSV, DATA, ROWS)
    assert capsys.readouterr().out == rows_csv(ROWS)  # no title, nothing else
    emit_rows(RowsFormat.JSON, DATA, ROWS)
    assert json.loads(capsys.readouterr().out) == DATA
    emit_rows(RowsFormat.YAML, DATA, ROWS)
    assert yaml.safe_load(capsys.readouterr().out) == DATA


def test_a_piped_table_is_never_cut(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = Rows(("charge_id", "description"), [("c" * 60, "d" * 90)], "title")
    monkeypatch.setattr(output, "stdout", output.Console(highlight=False, width=80, force_terminal=False))
    emit_rows(RowsFormat.TABLE, {}, wide)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "title"
    assert lines[1].split() == ["CHARGE", "ID", "DESCRIPTION"]
    assert lines[2].split() == ["c" * 60, "d" * 90]
