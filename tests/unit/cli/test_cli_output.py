"""The one output style of every list and get command (suanli.cli.output): each format parses back to
what it printed, piped tables are never cut, --no-headers, --sort-by and jsonpath templates."""

from __future__ import annotations

import csv
import io
import json

import pytest
import typer
import yaml
from rich.text import Text

from suanli.cli import output
from suanli.cli.output import Format, JsonPath, Output, Rows, emit, emit_rows, rows_csv, sorted_rows

ROWS = Rows(
    ("device_class", "description", "amount"),
    [("h200", "h200 compute, cn-east", "18.000000"), ("cpu", 'a "quoted" line', "0.016875")],
    "acme usage 2025-01: 18.016875 CNY",
    frozenset({"amount"}),
)
DATA = {"tenant": "acme", "rows": [{"amount": "18.000000"}]}

JOBS = [
    {"id": "j-1", "spec": {"name": "train", "queue": "acme"}, "state": "JOB_STATE_RUNNING", "gpu": 8},
    {"id": "j-2", "spec": {"name": "etl", "queue": "acme/data"}, "state": "JOB_STATE_PENDING", "gpu": 10},
    {"id": "j-3", "spec": {"name": "chat", "queue": "globex"}, "state": "JOB_STATE_PENDING", "gpu": 0.5},
]
LISTED = Rows(
    ("id", "name", "state", "gpu", "node"),
    [
        (j["id"], j["spec"]["name"], Text(j["state"][10:].capitalize(), style="cyan"), str(j["gpu"]), n)
        for j, n in zip(JOBS, ["n1", "-", "n" * 120], strict=True)
    ],
    wide=frozenset({"node"}),
    kind="job",
    items=JOBS,
    key="jobs",
)


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout as a pipe of 80 columns (what rich assumes when it cannot ask a terminal)."""
    monkeypatch.setattr(output, "stdout", output.Console(highlight=False, width=80, force_terminal=False))


def lines(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    return [line.split() for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("table", Output()),
        ("WIDE", Output(Format.WIDE)),
        ("name", Output(Format.NAME)),
        ("json", Output(Format.JSON)),
        ("yaml", Output(Format.YAML)),
        ("csv", Output(Format.CSV)),
        ("jsonpath={.jobs[*].id}", Output(Format.JSONPATH, "{.jobs[*].id}")),
        ("jsonpath=a=b {.x}", Output(Format.JSONPATH, "a=b {.x}")),
    ],
)
def test_output_parses_every_format(given: str, expected: Output) -> None:
    assert Output.parse(given) == expected
    assert Output.parse(expected) is expected  # typer hands the default through the parser too


@pytest.mark.parametrize("given", ["xml", "json=x", "jsonpath", "jsonpath={.a", "jsonpath={.a[}"])
def test_output_refuses_what_it_cannot_write(given: str) -> None:
    with pytest.raises(typer.BadParameter):
        Output.parse(given)


def test_csv_parses_back_to_the_rows() -> None:
    parsed = list(csv.reader(io.StringIO(rows_csv(ROWS))))
    assert parsed == [list(ROWS.columns), *map(list, ROWS.rows)]
    assert list(csv.reader(io.StringIO(rows_csv(ROWS, headers=False)))) == list(map(list, ROWS.rows))


def test_each_format_writes_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    emit_rows(Output(Format.CSV), DATA, ROWS)
    assert capsys.readouterr().out == rows_csv(ROWS)  # no title, nothing else
    emit_rows(Output(Format.JSON), DATA, ROWS)
    assert json.loads(capsys.readouterr().out) == DATA
    emit_rows(Output(Format.YAML), DATA, ROWS)
    assert yaml.safe_load(capsys.readouterr().out) == DATA
    emit_rows(Output(Format.NAME), {"jobs": JOBS}, LISTED)
    assert capsys.readouterr().out.splitlines() == ["job/j-1", "job/j-2", "job/j-3"]
    emit_rows(Output(Format.NAME), DATA, ROWS)  # no kind: the first column
    assert capsys.readouterr().out.splitlines() == ["h200", "cpu"]


def test_a_piped_table_is_never_cut(capsys: pytest.CaptureFixture[str], piped: None) -> None:
    wide = Rows(("charge_id", "description"), [("c" * 60, "d" * 90)], "title")
    emit_rows(Output(), {}, wide)
    assert lines(capsys) == [["title"], ["CHARGE", "ID", "DESCRIPTION"], ["c" * 60, "d" * 90]]


def test_wide_adds_its_columns_and_no_headers_drops_the_heading(
    capsys: pytest.CaptureFixture[str], piped: None
) -> None:
    emit_rows(Output(), {"jobs": JOBS}, LISTED)
    assert lines(capsys) == [
        ["ID", "NAME", "STATE", "GPU"],
        ["j-1", "train", "Running", "8"],
        ["j-2", "etl", "Pending", "10"],
        ["j-3", "chat", "Pending", "0.5"],
    ]
    emit_rows(Output(Format.WIDE), {"jobs": JOBS}, LISTED, no_headers=True)
    shown = lines(capsys)
    assert shown[0] == ["j-1", "train", "Running", "8", "n1"]
    assert shown[2] == ["j-3", "chat", "Pending", "0.5", "n" * 120]  # piped: not cut at 80 columns
    emit_rows(Output(), DATA, ROWS, no_headers=True)
    assert lines(capsys)[0] == ["h200", "h200", "compute,", "cn-east", "18.000000"]  # no title either


def test_more_tables_follow_for_people_and_stay_out_of_the_script_forms(
    capsys: pytest.CaptureFixture[str], piped: None
) -> None:
    more = Rows(("region", "reason"), [("tokyo", "r" * 100)], "excluded: 1", headings=("Region", "Why"))
    emit_rows(Output(), DATA, ROWS, more=[more])
    shown = lines(capsys)
    assert shown[4:] == [[], ["excluded:", "1"], ["Region", "Why"], ["tokyo", "r" * 100]]
    emit_rows(Output(), DATA, ROWS, no_headers=True, more=[more])
    assert lines(capsys)[2:] == [["tokyo", "r" * 100]]  # no blank line, title or heading between
    emit_rows(Output(Format.CSV), DATA, ROWS, more=[more])
    assert capsys.readouterr().out == rows_csv(ROWS)
    emit_rows(Output(Format.JSON), DATA, ROWS, more=[more])
    assert json.loads(capsys.readouterr().out) == DATA


def test_a_detail_view_is_not_cut_when_piped(capsys: pytest.CaptureFixture[str], piped: None) -> None:
    emit(Output(), {"id": "j-1"}, Text("x" * 150), name="job/j-1")
    assert capsys.readouterr().out.strip() == "x" * 150
    emit(Output(Format.NAME), {"id": "j-1"}, Text(""), name="job/j-1")
    assert capsys.readouterr().out == "job/j-1\n"
    with pytest.raises(typer.BadParameter, match="csv is for lists"):
        emit(Output(Format.CSV), {}, Text(""))


@pytest.mark.parametrize(
    ("sort_by", "ids"),
    [
        ("gpu", ["j-3", "j-1", "j-2"]),  # numbers by value, not as text ("10" < "8")
        ("-gpu", ["j-2", "j-1", "j-3"]),
        ("name", ["j-3", "j-2", "j-1"]),
        ("NAME", ["j-3", "j-2", "j-1"]),
        ("node", ["j-1", "j-3", "j-2"]),  # "-" (none) last
        ("-node", ["j-3", "j-1", "j-2"]),  # ... whichever the direction
        (".spec.queue", ["j-1", "j-2", "j-3"]),
        ("-{.spec.queue}", ["j-3", "j-2", "j-1"]),
    ],
)
def test_sort_by_a_column_or_a_field(sort_by: str, ids: list[str]) -> None:
    ordered = sorted_rows(LISTED, sort_by)
    assert [row[0] for row in ordered.rows] == ids
    assert [item["id"] for item in ordered.items] == ids


def test_sort_by_orders_the_json_too(capsys: pytest.CaptureFixture[str]) -> None:
    emit_rows(Output(Format.JSON), {"jobs": JOBS, "total": 3}, LISTED, sort_by="name")
    data = json.loads(capsys.readouterr().out)
    assert [j["id"] for j in data["jobs"]] == ["j-3", "j-2", "j-1"] and data["total"] == 3


def test_sort_by_an_unknown_column_names_the_columns() -> None:
    with pytest.raises(typer.BadParameter, match="id, name, state, gpu, node"):
        sorted_rows(LISTED, "colour")


def test_grouped_rows_show_their_head_once_and_count_once() -> None:
    queues = [{"name": "acme"}, {"name": "globex"}]
    rows = Rows(
        ("queue", "flavour"),
        [("acme", "cpu"), ("acme", "gpu"), ("globex", "cpu")],
        kind="queue",
        names=["acme", "acme", "globex"],
        items=[queues[0], queues[0], queues[1]],
        key="queues",
        group=1,
    )
    console = output.Console(file=io.StringIO(), width=80)
    console.print(output.rows_table(rows))
    shown = [line.split() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert shown == [["QUEUE", "FLAVOUR"], ["acme", "cpu"], ["gpu"], ["globex", "cpu"]]
    assert rows_csv(rows).splitlines()[2] == "acme,gpu"  # CSV lines stand alone


def test_grouped_rows_name_and_list_each_item_once(capsys: pytest.CaptureFixture[str]) -> None:
    queues = [{"name": "acme"}, {"name": "globex"}]
    rows = Rows(
        ("queue", "flavour"),
        [("acme", "cpu"), ("acme", "gpu"), ("globex", "cpu")],
        kind="queue",
        names=["acme", "acme", "globex"],
        items=[queues[0], queues[0], queues[1]],
        key="queues",
        group=1,
    )
    emit_rows(Output(Format.NAME), {"queues": queues}, rows)
    assert capsys.readouterr().out.splitlines() == ["queue/acme", "queue/globex"]
    emit_rows(Output(Format.JSON), {"queues": queues}, rows, sort_by="-queue")
    assert json.loads(capsys.readouterr().out) == {"queues": [queues[1], queues[0]]}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.jobs[*].id}", "j-1 j-2 j-3"),
        (".jobs[0].spec.name", "train"),
        ("{.jobs[-1].gpu}", "0.5"),
        ("{.jobs[1]['spec'][\"queue\"]}", "acme/data"),
        ('{range .jobs[*]}{.id}{"\\t"}{.spec.name}{"\\n"}{end}', "j-1\ttrain\nj-2\tetl\nj-3\tchat\n"),
        (
            "{range .jobs[*]}{.id}={.state}\\n{end}",
            "j-1=JOB_STATE_RUNNING\nj-2=JOB_STATE_PENDING\nj-3=JOB_STATE_PENDING\n",
        ),
        ("total: {.total}", "total: 3"),
        ("{..queue}", "acme acme/data globex"),
        ("{.jobs[0].spec}", '{"name": "train", "queue": "acme"}'),
        ("{.jobs[0].missing}", ""),  # a field that is not there prints nothing, as kubectl's default
        ("{.jobs[9].id}", ""),
    ],
)
def test_jsonpath_templates(template: str, expected: str) -> None:
    assert JsonPath.compile(template).render({"jobs": JOBS, "total": 3}) == expected


def test_jsonpath_output_is_the_template_alone(capsys: pytest.CaptureFixture[str]) -> None:
    emit_rows(Output.parse("jsonpath={.jobs[*].id}"), {"jobs": JOBS}, LISTED, sort_by="-id")
    assert capsys.readouterr().out == "j-3 j-2 j-1\n"
