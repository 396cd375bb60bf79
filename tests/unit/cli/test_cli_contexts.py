"""`suanli config ...`: contexts listed, switched, set and deleted in the client config; no token shown."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from suanli.cli import config
from suanli.cli.main import app

RUNNER = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture(autouse=True)
def path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in (config.CONFIG_ENV, config.TOKEN_ENV, config.CONTEXT_ENV, config.CA_ENV):
        monkeypatch.delenv(name, raising=False)
    file = tmp_path / "config.yaml"
    monkeypatch.setenv(config.CONFIG_ENV, str(file))
    # The root command records --token/--context/--config in a module-level selection: keep it per test.
    monkeypatch.setattr(config, "SELECTED", config.Selection())
    yield file


def run(*args: str) -> tuple[int, str]:
    result = RUNNER.invoke(app, ["config", *args])
    return result.exit_code, result.output


def test_contexts_written_by_up_are_listed_switched_and_used(path: Path) -> None:
    config.write_context(path, config.Context("up", {"scheduler": "127.0.0.1:1"}, "secret-up"))
    config.write_context(
        path, config.Context("prod", {"scheduler": "10.0.0.1:50051"}, "secret-prod", "/ca.pem")
    )
    code, out = run("get-contexts")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["CURRENT", "NAME", "SCHEDULER", "BILLING", "ROUTING", "TLS", "TOKEN"]
    assert lines[1].split() == ["up", "127.0.0.1:1", "no", "yes"]
    assert lines[2].split() == ["*", "prod", "10.0.0.1:50051", "yes", "yes"]
    assert "secret" not in out
    assert run("use-context", "up") == (0, 'Switched to context "up".\n')
    assert run("current-context") == (0, "up\n")
    assert config.server("scheduler", "", "builtin") == "127.0.0.1:1"  # the CLI follows the switch
    assert config.token() == "secret-up"


def test_set_context_creates_then_changes_only_what_is_given(path: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    code, _ = run("set-context", "lab", "--scheduler", "lab:1", "--billing", "lab:2")
    assert code == 0
    assert run("current-context") == (0, "lab\n")  # the first context becomes current
    assert run("set-context", "lab", "--token-file", str(token_file))[0] == 0
    entry = yaml.safe_load(path.read_text())["contexts"][0]
    assert entry == {"name": "lab", "scheduler": "lab:1", "billing": "lab:2", "token-file": str(token_file)}
    assert config.token() == "from-file"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    code, out = run("set-context", "lab", "--token", "t", "--token-file", str(token_file))
    assert code == 2 and "give one of them" in out


def test_machine_output_and_view_redact_tokens(path: Path) -> None:
    config.write_context(path, config.Context("up", {"scheduler": "127.0.0.1:1"}, "secret-up"))
    code, out = run("get-contexts", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["current-context"] == "up"
    assert data["contexts"] == [{"name": "up", "scheduler": "127.0.0.1:1", "token": "REDACTED"}]
    code, out = run("view")
    assert code == 0 and "secret" not in out and yaml.safe_load(out)["contexts"][0]["token"] == "REDACTED"
    assert run("get-contexts", "-o", "name") == (0, "context/up\n")


def test_unknown_contexts_and_bad_files_are_one_line_errors(path: Path) -> None:
    config.write_context(path, config.Context("up", {}, ""))
    code, out = run("use-context", "nope")
    assert code == 3 and out.strip() == f"error: {path}: no context 'nope' (known: up)"
    assert run("delete-context", "up") == (0, f'Deleted context "up" from {path}.\n')
    code, out = run("current-context")
    assert code == 3 and "no current context" in out
    path.write_text("- just\n- a list\n")
    code, out = run("get-contexts")
    assert code == 2 and "not a client config" in out


def test_a_legacy_config_is_written_where_it_was_read(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(config.CONFIG_ENV)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    legacy = tmp_path / ".suanli" / "config.yaml"
    config.write_context(legacy, config.Context("old", {"scheduler": "old:1"}))
    assert run("set-context", "lab", "--scheduler", "lab:1") == (0, f'Context "lab" written to {legacy}.\n')
    assert [c["name"] for c in yaml.safe_load(legacy.read_text())["contexts"]] == ["old", "lab"]
    assert not (tmp_path / ".config").exists()
    legacy.unlink()  # without it, a new config goes to the XDG place
    new = tmp_path / ".config" / "suanli" / "config.yaml"
    assert run("set-context", "lab", "--scheduler", "lab:1") == (0, f'Context "lab" written to {new}.\n')
    assert yaml.safe_load(new.read_text())["contexts"] == [{"name": "lab", "scheduler": "lab:1"}]
