"""The client config: which context, which token, which address, and the file `suanli up` writes."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from suanli.cli import config


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in (config.CONFIG_ENV, config.TOKEN_ENV, config.CONTEXT_ENV):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config.yaml"
    monkeypatch.setenv(config.CONFIG_ENV, str(path))
    saved = config.Selection(config.SELECTED.token, config.SELECTED.context, config.SELECTED.config)
    config.SELECTED.token = config.SELECTED.context = config.SELECTED.config = None
    yield path
    config.SELECTED.token, config.SELECTED.context, config.SELECTED.config = (
        saved.token,
        saved.context,
        saved.config,
    )


def test_no_file_means_builtin_addresses_and_no_token(clean: Path) -> None:
    assert config.active_context() is None
    assert config.token() == ""
    assert config.server("scheduler", "", "127.0.0.1:50051") == "127.0.0.1:50051"


def test_write_context_then_read_it_back_with_precedence(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_context(clean, config.Context("up", {"scheduler": "10.0.0.1:1"}, "ctx-token"))
    config.write_context(
        clean, config.Context("lab", {"scheduler": "10.0.0.2:2", "billing": "10.0.0.2:3"}, "")
    )
    assert stat.S_IMODE(clean.stat().st_mode) == 0o600
    data = yaml.safe_load(clean.read_text())
    assert data["current-context"] == "lab" and [c["name"] for c in data["contexts"]] == ["up", "lab"]

    assert config.server("scheduler", "", "x") == "10.0.0.2:2" and config.token() == ""
    monkeypatch.setenv(config.CONTEXT_ENV, "up")
    assert config.server("scheduler", "", "x") == "10.0.0.1:1"
    assert config.server("billing", "", "builtin") == "builtin"  # the context has none
    assert config.server("scheduler", "given:1", "x") == "given:1"  # a flag or its variable wins
    assert config.token() == "ctx-token"
    monkeypatch.setenv(config.TOKEN_ENV, "env-token")
    assert config.token() == "env-token"
    config.SELECTED.token = "flag-token"
    assert config.token() == "flag-token"


def test_token_file_and_bad_files_are_reported(clean: Path, tmp_path: Path) -> None:
    secret = tmp_path / "t.token"
    secret.write_text("file-token\n")
    clean.write_text(
        yaml.safe_dump({"current-context": "a", "contexts": [{"name": "a", "token-file": str(secret)}]})
    )
    assert config.token() == "file-token"
    config.SELECTED.context = "nope"
    with pytest.raises(config.ConfigError, match="no context 'nope' \\(known: a\\)"):
        config.active_context()
    clean.write_text("contexts: [{token: x}]\ncurrent-context: a\n")
    config.SELECTED.context = None
    with pytest.raises(config.ConfigError, match="every context needs a name"):
        config.active_context()
    clean.write_text("{unclosed")
    with pytest.raises(config.ConfigError, match="not YAML"):
        config.active_context()
