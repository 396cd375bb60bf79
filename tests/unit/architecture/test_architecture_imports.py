"""The import contracts in pyproject.toml hold on the tree, and each one fails on a deliberate violation.

``lint-imports`` only sees the packages it can import: ``suanli`` is a namespace package over three roots,
so every run puts ``libs``, ``services`` and ``apps`` on ``PYTHONPATH`` (as ``make lint`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = REPO_ROOT / "pyproject.toml"
ROOTS = ("libs", "services", "apps")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# Imports in service code that break a contract today, as (contract id, importer, imported). The services'
# own work removes them; when it lands, the set becomes empty and the tree must pass as a whole.
KNOWN_VIOLATIONS: frozenset[tuple[str, str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class Run:
    returncode: int
    output: str
    broken: frozenset[tuple[str, str, str]]  # (contract id, importer, imported)


def _contract_ids_by_name() -> dict[str, str]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["name"]: c["id"] for c in config["contracts"]}


def _broken_imports(output: str) -> frozenset[tuple[str, str, str]]:
    """The direct imports listed under each broken contract (``-   a.b -> c (l.10)`` lines)."""
    ids = _contract_ids_by_name()
    lines = output.splitlines()
    if "Broken contracts" not in lines:
        return frozenset()
    found: set[tuple[str, str, str]] = set()
    contract: str | None = None
    for i, line in enumerate(
        lines[lines.index("Broken contracts") + 2 :], start=lines.index("Broken contracts") + 2
    ):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if line in ids and following == "-" * len(line):
            contract = ids[line]
        elif contract and line.startswith("-   ") and " -> " in line:
            importer, imported = line.removeprefix("-   ").split(" (l.")[0].split(" -> ")
            found.add((contract, importer, imported))
    return frozenset(found)


def lint_imports(tree: Path, *contracts: str) -> Run:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(tree / root) for root in ROOTS)}
    args = [str(LINT_IMPORTS), str(PYPROJECT), "--no-cache", *(f"--contract={c}" for c in contracts)]
    done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=60, check=False)
    output = done.stdout + done.stderr
    return Run(done.returncode, output, _broken_imports(output))


@pytest.fixture(scope="module")
def real_run() -> Run:
    return lint_imports(REPO_ROOT)


def test_lint_imports_sees_every_package_of_the_three_roots(real_run: Run) -> None:
    # A missing root would fail loudly ("Module 'suanli.metering' does not exist"), not pass quietly.
    assert "does not exist" not in real_run.output
    assert "Analyzed" in real_run.output, real_run.output


def test_the_tree_keeps_every_contract_but_the_known_service_imports(real_run: Run) -> None:
    assert real_run.broken == KNOWN_VIOLATIONS, real_run.output
    assert real_run.returncode == (1 if KNOWN_VIOLATIONS else 0), real_run.output


def _copy_tree(destination: Path) -> Path:
    """The three roots with their Python files only (no data links, no caches)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {
            n
            for n in names
            if n == "__pycache__"
            or n == "data"
            or (not n.endswith(".py") and not (Path(directory) / n).is_dir())
        }

    for root in ROOTS:
        shutil.copytree(REPO_ROOT / root, destination / root, ignore=ignore, symlinks=True)
    return destination


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_tree(tmp_path_factory.mktemp("tree"))


# One deliberate violation per contract: (contract id, root, module path, import statement, imported).
VIOLATIONS = [
    ("kernel", "libs", "suanli/resources/violation.py", "import suanli.billing", "suanli.billing"),
    ("kernel", "libs", "suanli/bus/violation.py", "import suanli.platform", "suanli.platform"),
    ("services-independent", "services", "suanli/billing/violation.py", "import suanli.metering", None),
    ("services-below-apps", "services", "suanli/sensing/violation.py", "import suanli.cli", "suanli.cli"),
    ("domain-pure", "services", "suanli/scheduling/domain/violation.py", "import time", "time"),
    ("domain-pure", "services", "suanli/metering/domain/violation.py", "import asyncpg", "asyncpg"),
    ("domain-kernel", "services", "suanli/billing/domain/violation.py", "import suanli.bus", "suanli.bus"),
]


@pytest.mark.parametrize(("contract", "root", "module", "statement", "imported"), VIOLATIONS)
def test_each_contract_fails_on_a_deliberate_violation(
    tree: Path, contract: str, root: str, module: str, statement: str, imported: str | None
) -> None:
    path = tree / root / module
    path.write_text(f'"""A deliberate violation of the {contract} contract."""\n\n{statement}\n')
    try:
        run = lint_imports(tree, contract)
    finally:
        path.unlink()
    importer = module.removesuffix(".py").replace("/", ".")
    assert run.returncode == 1, run.output
    if imported is None:
        # Independence reports the pair of packages and the chain between them.
        assert "suanli.billing is not allowed to import suanli.metering" in run.output, run.output
        assert f"{importer} -> suanli.metering" in run.output, run.output
    else:
        assert (contract, importer, imported) in run.broken, run.output


def test_the_copied_tree_is_as_clean_as_the_real_one(tree: Path, real_run: Run) -> None:
    # Guards the test above: without a violation the copy breaks exactly what the real tree breaks.
    assert lint_imports(tree).broken == real_run.broken
