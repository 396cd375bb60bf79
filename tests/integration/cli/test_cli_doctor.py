"""`suanli doctor` against the real broker and PostgreSQL: the facts it reports and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.cli import config
from suanli.cli.main import app
from suanli.infra.net import free_loopback_port

RUNNER = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SUANLI_ENV", "SUANLI_PG_DSN", "SUANLI_KAFKA_BOOTSTRAP", config.TOKEN_ENV, config.CA_ENV):
        monkeypatch.delenv(name, raising=False)
    for name in ("SUANLI_SCHEDULER_ADDR", "SUANLI_BILLING_ADDR", "SUANLI_ROUTING_ADDR", "SUANLI_TLS_CERT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(config.CONFIG_ENV, str(tmp_path / "config.yaml"))
    monkeypatch.setattr(config, "SELECTED", config.Selection())


def checks(*args: str) -> tuple[int, dict[str, dict[str, str]]]:
    result = RUNNER.invoke(app, ["doctor", *args, "-o", "json"])
    return result.exit_code, {c["check"]: c for c in json.loads(result.stdout)["checks"]}


def test_a_development_setup_passes_and_production_mode_warns_with_reasons(
    kafka_bootstrap: str, pg_dsn: str
) -> None:
    code, found = checks("--kafka", kafka_bootstrap, "--dsn", pg_dsn)
    assert code == 0
    assert found["kafka.broker"]["level"] == "OK" and found["postgres.server"]["level"] == "OK"
    assert found["kafka.security"]["level"] == "INFO"  # plaintext: fine on a development machine
    code, found = checks("--kafka", kafka_bootstrap, "--dsn", pg_dsn, "--production")
    assert code == 0  # warnings only
    assert found["kafka.security"]["level"] == "WARN"
    assert found["postgres.sslmode"]["level"] == "WARN"
    assert "verify-full" in found["postgres.sslmode"]["message"]
    code, _ = checks("--kafka", kafka_bootstrap, "--dsn", pg_dsn, "--production", "--strict")
    assert code == 1


def test_what_cannot_be_reached_fails(tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_loopback_port()}"
    config.write_context(tmp_path / "config.yaml", config.Context("up", {"scheduler": nobody}, "not-a-jwt"))
    code, found = checks("--kafka", nobody, "--dsn", f"postgresql://root@{nobody}/test")
    assert code == 1
    assert found["kafka.broker"]["level"] == "FAIL" and nobody in found["kafka.broker"]["message"]
    assert found["postgres.server"]["level"] == "FAIL"
    assert found["grpc.scheduler"]["level"] == "FAIL"
    assert found["token"]["level"] == "FAIL" and "not a JWT" in found["token"]["message"]
