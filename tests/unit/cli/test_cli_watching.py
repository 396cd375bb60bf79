"""`--watch` on lists (suanli.cli.watching): the list once, then only the rows that appear or change,
in every output form, until the polls end (Ctrl-C for a person)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from suanli.cli.output import Format, Output, Rows
from suanli.cli.watching import changed, watch


def listing(*jobs: tuple[str, str]) -> tuple[dict[str, Any], Rows]:
    items = [{"id": job_id, "state": state} for job_id, state in jobs]
    rows = Rows(
        ("id", "state"),
        [(i["id"], i["state"]) for i in items],
        title=f"{len(items)} jobs",
        kind="job",
        items=items,
        key="jobs",
    )
    return {"jobs": items}, rows


ROUNDS = [
    listing(("j-1", "Pending"), ("j-2", "Running")),
    listing(("j-1", "Pending"), ("j-2", "Running")),  # nothing new: nothing printed
    listing(("j-3", "Pending"), ("j-1", "Running"), ("j-2", "Running")),  # j-3 new, j-1 changed
    listing(("j-3", "Pending"), ("j-1", "Succeeded")),  # j-2 gone: not printed
]


def run(out: Output, capsys: pytest.CaptureFixture[str]) -> tuple[str, list[float]]:
    answers = iter(ROUNDS)
    slept: list[float] = []
    watch(lambda: next(answers), out, interval_s=1.5, sleep=slept.append, polls=len(ROUNDS) - 1)
    return capsys.readouterr().out, slept


def test_the_table_goes_on_with_each_new_or_changed_row(capsys: pytest.CaptureFixture[str]) -> None:
    printed, slept = run(Output(), capsys)
    lines = [line.split() for line in printed.splitlines()]
    assert lines == [
        ["2", "jobs"],
        ["ID", "STATE"],
        ["j-1", "Pending"],
        ["j-2", "Running"],
        ["j-3", "Pending"],  # no heading, no title again
        ["j-1", "Running"],
        ["j-1", "Succeeded"],
    ]
    assert slept == [1.5, 1.5, 1.5]


def test_json_prints_one_document_per_round_with_changes(capsys: pytest.CaptureFixture[str]) -> None:
    printed, _ = run(Output(Format.JSON), capsys)
    decoder = json.JSONDecoder()
    documents, at = [], 0
    while at < len(printed.strip()):
        document, end = decoder.raw_decode(printed, at)
        documents.append(document)
        at = end + 1
    assert [[(j["id"], j["state"]) for j in d["jobs"]] for d in documents] == [
        [("j-1", "Pending"), ("j-2", "Running")],
        [("j-3", "Pending"), ("j-1", "Running")],
        [("j-1", "Succeeded")],
    ]


def test_names_of_changed_rows(capsys: pytest.CaptureFixture[str]) -> None:
    printed, _ = run(Output(Format.NAME), capsys)
    assert printed.split() == ["job/j-1", "job/j-2", "job/j-3", "job/j-1", "job/j-1"]


def test_a_grouped_row_printed_alone_carries_its_group_cells() -> None:
    rows = Rows(
        ("queue", "flavour", "used"),
        [("acme", "cpu", "1"), ("acme", "gpu", "2")],
        names=["acme", "acme"],
        group=1,
    )
    fresh = changed({("acme", "cpu", "1")}, rows)
    assert list(fresh.rows) == [("acme", "gpu", "2")] and fresh.group == 0
