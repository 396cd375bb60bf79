"""Where the client config is: SUANLI_CONFIG, else $XDG_CONFIG_HOME/suanli/config.yaml (~/.config when
unset), else, while only it exists, the legacy ~/.suanli/config.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.client.config import CONFIG_ENV, XDG_CONFIG_ENV, config_path, load_context


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (CONFIG_ENV, XDG_CONFIG_ENV, "SUANLI_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def a_config(path: Path, scheduler: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"current-context: c\ncontexts:\n  - name: c\n    scheduler: {scheduler}\n")
    return path


def test_the_default_is_under_dot_config(home: Path) -> None:
    assert config_path() == home / ".config" / "suanli" / "config.yaml"


def test_xdg_config_home_moves_it_and_a_relative_one_is_ignored(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(XDG_CONFIG_ENV, str(home / "xdg"))
    assert config_path() == home / "xdg" / "suanli" / "config.yaml"
    monkeypatch.setenv(XDG_CONFIG_ENV, "relative/dir")  # the XDG spec: invalid, so the default
    assert config_path() == home / ".config" / "suanli" / "config.yaml"


def test_a_legacy_file_is_used_while_the_new_one_does_not_exist(home: Path) -> None:
    legacy = a_config(home / ".suanli" / "config.yaml", "legacy:1")
    assert config_path() == legacy
    context = load_context()
    assert context is not None and context.servers == {"scheduler": "legacy:1"}
    new = a_config(home / ".config" / "suanli" / "config.yaml", "new:1")
    assert config_path() == new
    context = load_context()
    assert context is not None and context.servers == {"scheduler": "new:1"}


def test_suanli_config_wins_over_both_and_an_argument_over_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_config(home / ".suanli" / "config.yaml", "legacy:1")
    a_config(home / ".config" / "suanli" / "config.yaml", "new:1")
    monkeypatch.setenv(CONFIG_ENV, str(home / "chosen.yaml"))
    assert config_path() == home / "chosen.yaml"
    assert load_context() is None  # that file does not exist: no context, not the others'
    assert config_path(home / "given.yaml") == home / "given.yaml"
