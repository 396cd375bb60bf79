"""The built wheel is the whole platform: installed outside the source tree, `suanli` runs from it alone.

The wheel's dependencies are taken from the project's own virtualenv (its site-packages joined to the
new environment's path), so the test needs no network; the editable install of the checkout is not
seen there, because `.pth` files of a joined path are not processed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv, outside the checkout, with only the wheel of this project installed."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "-w", str(dist)], root)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("suanli-*.whl")
    env_dir = root / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root
        ).stdout.strip()
    )
    (site / "project_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", str(wheel)], root
    )
    if "no such option: --python" in installed.stderr:
        installed = _run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)], root
        )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return env_dir


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUANLI_") and k != "PYTHONPATH"}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_the_wheel_holds_every_floor_and_its_data(installed: Path, tmp_path: Path) -> None:
    probe = (
        "import json, suanli, suanli.bus, suanli.scheduling.domain, suanli.cli.main, suanli.platform.up;"
        "from suanli.data import data_path;"
        "from suanli.api.scheduler.v1 import scheduler_pb2;"
        "print(json.dumps({'path': list(suanli.__path__), 'schemas': str(data_path('schemas/avro')),"
        " 'fleet': data_path('deploy/fleets/small.yaml').is_file(),"
        " 'avsc': len(list(data_path('schemas/avro').rglob('*.avsc')))}))"
    )
    result = _run([str(installed / "bin" / "python"), "-c", probe], tmp_path, _clean_env())
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert all(str(REPO_ROOT) not in p for p in found["path"]), found["path"]
    assert str(REPO_ROOT) not in found["schemas"]
    assert found["fleet"] is True
    assert found["avsc"] == len(list((REPO_ROOT / "schemas" / "avro").rglob("*.avsc")))


def test_suanli_help_and_a_small_simulation_run_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    suanli = str(installed / "bin" / "suanli")
    shown = _run([suanli, "--help"], tmp_path, _clean_env())
    assert shown.returncode == 0, shown.stderr[-3000:]
    for command in ("up", "job", "simulate", "serve", "agent"):
        assert command in shown.stdout

    pods = REPO_ROOT / "traces" / "openb" / "openb_pod_list_default.csv"
    head = pods.read_text().splitlines()[:400]
    small = tmp_path / "pods.csv"
    small.write_text("\n".join(head) + "\n")
    out = tmp_path / "summary.json"
    ran = _run(
        [
            suanli,
            "simulate",
            "--pods",
            str(small),
            "--policy",
            "fgdb",
            "--seeds",
            "1",
            "--json",
            str(out),
            "--workers",
            "1",
        ],
        tmp_path,
        _clean_env(),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(out.read_text())
    fgdb = summary["results"]["fgdb"]
    assert fgdb["unallocated_pct_at_100"]["per_seed"], "one seed was simulated"
    assert 0.0 <= fgdb["unallocated_pct_at_100"]["mean"] < 100.0
