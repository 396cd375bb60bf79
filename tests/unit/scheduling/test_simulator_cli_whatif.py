"""`suanli simulate --fleet FILE --jobs DIR_OR_FILE` through typer's CliRunner: the outputs (JSON summary,
a timeline and a jobs CSV per run, the PNG) and one line with exit code 2 for every bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from suanli.cli.simulate import app
from suanli.data import data_path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "jobs"
SMALL = str(data_path("deploy/fleets/small.yaml"))
QUEUES = str(data_path("deploy/scheduler/queues.yaml"))
runner = CliRunner()


def test_outputs_side_by_side(tmp_path: Path) -> None:
    jobs = tmp_path / "burst"
    jobs.mkdir()
    chat = yaml.safe_load((EXAMPLES / "inference-fractional.yaml").read_text())
    (jobs / "chat.yaml").write_text(yaml.safe_dump([{"copies": 12, "job": chat}]))
    (jobs / "etl.yaml").write_text((EXAMPLES / "cpu-batch.yaml").read_text())
    (jobs / "notes.txt").write_text("not a job: only *.yaml files of a directory are read")
    out_json, out = tmp_path / "whatif.json", tmp_path / "runs"
    args = ["--fleet", SMALL, "--jobs", str(jobs), "--policy", "fgdb,bestfit", "--seeds", "1-2"]
    result = runner.invoke(
        app, [*args, "--rate", "0.02", "--queues", QUEUES, "--json", str(out_json), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert (data["workload"], data["mode"], data["fleet"], data["gpus"], data["jobs"]) == (
        "burst",
        "whatif",
        "small",
        74,
        13,
    )
    assert list(data["results"]) == ["fgdb", "bestfit"]
    for policy in data["results"].values():
        assert policy["placed"] + policy["never_placed"] == 13
        assert set(policy["wait_s"]) == {"mean", "p50", "p95", "max"}
        assert 0 <= policy["unallocated_pct"] <= 100
        assert [r["seed"] for r in policy["runs"]] == [1, 2]
        curve = policy["runs"][0]["allocation"]
        assert len(curve["time_s"]) == len(curve["allocation_pct"]) == len(curve["queue_length"]) > 1
    # The same seeds give both policies the same arrivals.
    assert (
        data["results"]["fgdb"]["runs"][0]["allocation"]["time_s"][:3]
        == (data["results"]["bestfit"]["runs"][0]["allocation"]["time_s"][:3])
    )
    assert json.loads((out / "burst_summary.json").read_text()) == data
    with open(out / "burst_fgdb_seed1_timeline.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["time_s", "allocation_pct", "queue_length"] and len(rows) > 2
    with open(out / "burst_bestfit_seed2_jobs.csv") as f:
        jobs_rows = list(csv.DictReader(f))
    assert len(jobs_rows) == 13 and {r["queue"] for r in jobs_rows} == {"globex", "initech"}
    assert (out / "burst_timeline.png").stat().st_size > 1000
    assert "burst on small" in result.output


def test_a_single_file_and_the_default_policy(tmp_path: Path) -> None:
    out_json = tmp_path / "one.json"
    result = runner.invoke(
        app, ["--fleet", SMALL, "--jobs", str(EXAMPLES / "training-gang.yaml"), "--json", str(out_json)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert data["workload"] == "training-gang" and list(data["results"]) == ["fgdb"]
    assert data["results"]["fgdb"]["placed"] == 1


def test_the_shipped_what_if_example_replays(tmp_path: Path) -> None:
    """examples/whatif, as docs/simulate.md runs it: every job fits the small fleet and is placed."""
    out_json = tmp_path / "burst.json"
    args = [
        "--fleet",
        SMALL,
        "--jobs",
        str(EXAMPLES.parent / "whatif"),
        "--rate",
        "0.05",
        "--json",
        str(out_json),
    ]
    result = runner.invoke(app, [*args, "--queues", QUEUES])
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert data["jobs"] == 79 and data["results"]["fgdb"]["placed"] == 79
    assert data["results"]["fgdb"]["waited"] > 0


def spec(**changes: object) -> dict[str, object]:
    document = yaml.safe_load((EXAMPLES / "training-gang.yaml").read_text())
    document.update(changes)
    return document


BAD_JOBS = {
    "not-a-spec": ({"foo": "bar"}, "not a job spec"),
    "a-list-of-strings": (["just", "words"], "not a job spec"),
    "invalid-field": (spec(min_available=9), "invalid job spec: min_available"),
    "no-duration": (
        {"name": "x", "queue": "q", "tasks": [{"name": "t", "resources": {"cpu": "1"}}]},
        "have no duration",
    ),
    "never-fits": (
        spec(
            min_available=0,
            tasks=[{"name": "w", "resources": {"gpu": 8, "gpu_models": ["B200"]}, "duration": "1m"}],
        ),
        "never fits fleet small",
    ),
    "too-big-a-gang": (
        spec(
            tasks=[{"name": "w", "replicas": 4, "resources": {"gpu": 8}, "duration": "1m"}], min_available=4
        ),
        "never fits fleet small",
    ),
    "bad-wrapper": ({"at": "soon", "job": spec()}, "at: must be like"),
    "unknown-wrapper-key": ({"when": 3, "job": spec()}, "unknown key(s) ['when']"),
}


@pytest.mark.parametrize("case", BAD_JOBS, ids=str)
def test_a_bad_job_file_is_one_line(case: str, tmp_path: Path) -> None:
    document, problem = BAD_JOBS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(document))
    result = runner.invoke(app, ["--fleet", SMALL, "--jobs", str(path)])
    one_line_error(result, str(path), problem)


def one_line_error(result: Result, where: str, problem: str) -> None:
    """Exit code 2, no traceback, and one line naming the file (or flag) and the problem."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and where in lines[0] and problem in lines[0], lines[0]


def test_bad_files_and_flags_are_one_line(tmp_path: Path) -> None:
    jobs = str(EXAMPLES)
    missing = str(tmp_path / "nope.yaml")
    one_line_error(runner.invoke(app, ["--fleet", missing, "--jobs", jobs]), missing, "no such fleet file")
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", missing]), missing, "no such file or directory"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", str(empty)]), str(empty), "no *.yaml job files"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", str(broken)]), str(broken), "not valid YAML"
    )
    one_line_error(
        runner.invoke(app, ["--fleet", str(broken), "--jobs", jobs]), str(broken), "not a fleet file"
    )
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    for flag, other in (
        ("--jobs", ["--fleet", SMALL]),
        ("--fleet", ["--jobs", jobs]),
        ("--queues", ["--fleet", SMALL, "--jobs", jobs]),
    ):
        one_line_error(runner.invoke(app, [*other, flag, str(binary)]), str(binary), "not UTF-8 text")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump({"name": "f", "regions": [{"name": "r", "sites": [{"node_groups": [{}]}]}]})
    )
    one_line_error(
        runner.invoke(app, ["--fleet", str(fleet), "--jobs", jobs]), str(fleet), "not a fleet file"
    )
    pods = EXAMPLES / "cpu-batch.yaml"
    one_line_error(runner.invoke(app, ["--pods", str(pods)]), str(pods), "takes an openb CSV, not YAML")
    csv_path = tmp_path / "pods.csv"
    csv_path.write_text("a,b\n1,2\n")
    one_line_error(runner.invoke(app, ["--pods", str(csv_path)]), str(csv_path), "header lacks name")
    one_line_error(runner.invoke(app, ["--fleet", SMALL]), "--jobs", "needs both")
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", jobs, "--pods", str(csv_path)]), "--pods", "no --pods"
    )
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", jobs, "--policy", "nope"]), "--policy", "'nope'"
    )
    one_line_error(runner.invoke(app, ["--fleet", SMALL, "--jobs", jobs, "--rate", "0"]), "--rate", "> 0")
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump({"queues": [{"name": "globex"}]}))
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", jobs, "--queues", str(queues)]),
        str(queues),
        "queue 'initech' is not in",
    )
    queues.write_text("queues: 3\n")
    one_line_error(
        runner.invoke(app, ["--fleet", SMALL, "--jobs", jobs, "--queues", str(queues)]),
        str(queues),
        "must be a list",
    )


def test_help_names_the_what_if_mode() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--fleet", "--jobs", "--queues", "--rate"):
        assert flag in result.output
