"""The root command: sub-commands imported only when used, their help lines, --version, completion."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from suanli.cli.main import COMMANDS, app, load_command

RUNNER = CliRunner(env={"COLUMNS": "200"})


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_help_line_is_the_commands_own(name: str) -> None:
    # The root help shows COMMANDS' lines without importing; they must say what the command says.
    command = load_command(name)
    assert command.name == name
    assert " ".join((command.help or "").split()).startswith(COMMANDS[name][1]), command.help


def test_the_root_help_lists_every_command_without_importing_them() -> None:
    script = (
        "import sys\n"
        "from suanli.cli.main import app\n"
        "try:\n"
        "    app(['--help'], prog_name='suanli')\n"
        "except SystemExit:\n"
        "    pass\n"
        "wanted = ('suanli.cli.', 'suanli.scheduling', 'grpc')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(wanted))\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={"COLUMNS": "200"}, check=True
    )
    for name in COMMANDS:
        assert f" {name} " in done.stdout
    assert "LOADED ['suanli.cli.main']" in done.stdout, done.stdout


def test_version() -> None:
    result = RUNNER.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"suanli {version('suanli')}\n"


def test_shell_completion_is_offered() -> None:
    result = RUNNER.invoke(app, ["--show-completion", "bash"])
    assert result.exit_code == 0 and "_SUANLI_COMPLETE" in result.stdout, result.output


def test_a_lazy_command_runs_and_an_unknown_one_is_refused() -> None:
    assert RUNNER.invoke(app, ["job", "list", "--help"]).exit_code == 0
    unknown = RUNNER.invoke(app, ["jobz"])
    assert unknown.exit_code == 2 and "No such command 'jobz'" in unknown.output


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("suanli jo", ["job"]),
        ("suanli job l", ["list", "logs"]),
        ("suanli job list -o ", ["table", "wide", "name", "json", "yaml", "csv", "jsonpath="]),
    ],
)
def test_completion_reaches_into_lazy_commands(words: str, expected: list[str]) -> None:
    env = {
        "_SUANLI_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    result = RUNNER.invoke(app, [], env=env, prog_name="suanli")
    assert result.stdout.split() == expected, result.output
