"""`suanli dev status` in the CLI's one output style, on a recorded stack whose parts are up or down
(the processes themselves are started in tests/integration/infra/test_devstack.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.cli import output
from suanli.cli.main import app
from suanli.infra import devstack

runner = CliRunner()
DSN = "postgresql://suanli@127.0.0.1:5432/suanli?application_name=" + "suanli-dev-" * 8
STACK = devstack.DevStack(
    broker_pid=4242, kafka_bootstrap="127.0.0.1:19092", pg_dsn=DSN, pg_source="embedded", pg_data_dir="/h/pg"
)


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(devstack, "load", lambda home: STACK if home == tmp_path else None)
    monkeypatch.setattr(devstack, "status", lambda stack: devstack.DevStatus(False, False, True))
    monkeypatch.setattr(output, "stdout", output.Console(highlight=False, width=80, force_terminal=False))
    return tmp_path


def status(home: Path, *args: str) -> str:
    result = runner.invoke(app, ["dev", "status", "--home", str(home), *args])
    assert result.exit_code == 1, result.output  # something is down, whatever the format
    return result.stdout


def test_status_lines_never_cut_when_piped(broker_down: Path) -> None:
    shown = [line.split() for line in status(broker_down).splitlines()]
    assert shown == [
        ["COMPONENT", "WHERE", "STATE"],
        ["broker", "(tansu)", "127.0.0.1:19092", "down"],
        ["postgres", "(embedded)", DSN, "running"],  # the DSN whole, though wider than 80 columns
    ]
    wide = [line.split() for line in status(broker_down, "-o", "wide", "--no-headers").splitlines()]
    assert wide == [
        ["broker", "(tansu)", "127.0.0.1:19092", "down", "4242", "-"],
        ["postgres", "(embedded)", DSN, "running", "-", "/h/pg"],
    ]


def test_status_for_scripts(broker_down: Path) -> None:
    data = json.loads(status(broker_down, "-o", "json"))
    assert data == {
        "components": [
            {
                "name": "broker",
                "source": "tansu",
                "where": "127.0.0.1:19092",
                "state": "down",
                "pid": 4242,
                "data_dir": None,
            },
            {
                "name": "postgres",
                "source": "embedded",
                "where": DSN,
                "state": "running",
                "pid": None,
                "data_dir": "/h/pg",
            },
        ]
    }
    by_state = json.loads(status(broker_down, "-o", "json", "--sort-by", "-state"))
    assert [c["name"] for c in by_state["components"]] == ["postgres", "broker"]
    rows = list(csv.reader(io.StringIO(status(broker_down, "-o", "csv", "--sort-by", "state"))))
    assert rows[0] == ["component", "where", "state", "pid", "data_dir"]
    assert [r[2] for r in rows[1:]] == ["down", "running"]
    assert status(broker_down, "-o", "name").split() == ["component/broker", "component/postgres"]


def test_nothing_started_says_so_on_stderr(broker_down: Path) -> None:
    result = runner.invoke(app, ["dev", "status", "--home", str(broker_down / "elsewhere"), "-o", "json"])
    assert (result.exit_code, result.stdout) == (1, "")
    assert "nothing started: run `suanli dev up`" in result.stderr
