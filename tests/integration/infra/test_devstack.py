"""`suanli dev up|status|down` through the CLI: processes really start, serve and stop."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from suanli.cli.main import app
from suanli.infra import devstack
from suanli.infra.net import kafka_metadata_answers
from suanli.infra.process import pid_alive


def test_dev_up_status_down(service_home: Path) -> None:
    runner = CliRunner()
    home = service_home / "home"
    result = runner.invoke(app, ["dev", "up", "--home", str(home), "--embedded-pg"])
    assert result.exit_code == 0, result.output
    stack = devstack.load(home)
    assert stack is not None and stack.pg_source == "embedded"
    try:
        assert kafka_metadata_answers("127.0.0.1", stack.broker_port)
        status = runner.invoke(app, ["dev", "status", "--home", str(home)])
        assert status.exit_code == 0, status.output
        assert "running" in status.output
        as_data = runner.invoke(app, ["dev", "status", "--home", str(home), "-o", "json"])
        states = {c["name"]: c["state"] for c in json.loads(as_data.stdout)["components"]}
        assert states == {"broker": "running", "postgres": "running"}
    finally:
        down = runner.invoke(app, ["dev", "down", "--home", str(home)])
    assert down.exit_code == 0
    assert not pid_alive(stack.broker_pid)
    assert not devstack.embedded_running(Path(stack.pg_data_dir or ""))
    after = runner.invoke(app, ["dev", "status", "--home", str(home)])
    assert after.exit_code == 1
