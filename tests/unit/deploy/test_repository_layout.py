"""The README's Layout section, the Makefile and CI agree with the tree and with each other."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")


def _layout_block() -> list[str]:
    section = README.split("## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def _packages(root: str) -> set[str]:
    return {
        p.name for p in (REPO_ROOT / root / "suanli").iterdir() if p.is_dir() and p.name != "__pycache__"
    } | {p.stem for p in (REPO_ROOT / root / "suanli").glob("*.py")}


def _entry(prefix: str) -> str:
    """The text of the layout entry starting ``prefix``, its indented continuation lines included."""
    lines = _layout_block()
    start = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    return " ".join(
        [lines[start], *itertools.takewhile(lambda line: line.startswith(" "), lines[start + 1 :])]
    )


def test_every_path_the_layout_starts_a_line_with_exists() -> None:
    entries = [line for line in _layout_block() if not line.startswith(" ")]
    # The first line lists the files at the top; every other line starts with one path.
    paths = [*entries[0].split(), *(line.split()[0].split("<")[0] for line in entries[1:])]
    missing = [p for p in paths if not (REPO_ROOT / p).exists()]
    assert missing == []


def test_the_layout_names_every_package_of_each_floor() -> None:
    for root in ("libs", "services", "apps"):
        entry = _entry(f"{root}/suanli/")
        named = set(re.findall(r"\b([a-z]+)\b", entry))
        missing = _packages(root) - named
        assert missing == set(), (root, missing)
    assert "CONTRIBUTING.md" in README


def test_make_lint_runs_every_check_and_fails_on_any() -> None:
    recipe = MAKEFILE.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    for command in ("ruff check .", "ruff format --check .", "mypy", "lint-imports"):
        assert command in recipe, command
    assert "|| true" not in recipe and "-$(BIN)" not in recipe
    for target in ("test-unit", "test-integration", "test-e2e", "proto"):
        assert re.search(rf"^{target}:", MAKEFILE, re.MULTILINE), target


def test_ci_lints_before_the_readme_test_command() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in ci if line.startswith(("make ", "exec make "))]
    assert commands[0] == "make lint"
    assert commands[1].startswith("exec make test ")
    assert "make test " in README
