"""`suanli job trace`: a job's spans read from a trace store's Jaeger API, its timeline and phases."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import typer

from suanli.cli.output import Format, Output
from suanli.cli.trace import SUBMIT, job_hops, phases, show_trace
from suanli.telemetry.spanstore import SpanStoreServer, StoredSpan

JOB = "job-1"
T = "a" * 32
MS = 1_000_000  # ns


def _span(
    span_id: str, parent: str, service: str, name: str, start_ms: float, end_ms: float, **attributes: object
) -> StoredSpan:
    base = 1_700_000_000_000 * MS
    return StoredSpan(
        T,
        span_id,
        parent,
        name,
        "internal",
        base + int(start_ms * MS),
        base + int(end_ms * MS),
        dict(attributes),
        (),
        False,
        {"service.name": service, "service.instance.id": service},
    )


# A job's trace as the platform writes it (see tests/e2e/test_e2e_traces.py), times in ms from submit.
SPANS = [
    _span("01", "", "scheduling", SUBMIT, 0, 40, job_id=JOB),
    _span("02", "01", "scheduling", "scheduling.commit", 2, 10),
    _span("03", "01", "scheduling", "scheduling.decide", 15, 100, job_id=JOB),
    _span("04", "03", "sensing", "placements process", 160, 161, **{"suanli.event_name": "TaskPlaced"}),
    _span("05", "04", "sensing", "sensing.start_task", 160.5, 161, job_id=JOB, node_id="n1"),
    _span(
        "06", "05", "sensing", "tasks.lifecycle publish", 1161, 1170, **{"suanli.event_name": "TaskFinished"}
    ),
    _span("07", "06", "metering", "metering.tasks.lifecycle", 1200, 1205),
    _span("08", "07", "metering", "metering.window", 1250, 1260),
    _span("09", "08", "billing", "usage.metered process", 1380, 1430),
    _span("10", "09", "billing", "billing.charge", 1381, 1429, job_id=JOB),
]


@pytest.fixture
def store() -> Iterator[SpanStoreServer]:
    with SpanStoreServer() as server:
        server.store.add(SPANS)
        yield server


def test_the_phases_split_the_path_between_its_landmarks(store: SpanStoreServer) -> None:
    hops = job_hops(store.query_url, JOB)
    assert [h.span_id for h in hops] == [s.span_id for s in SPANS]
    found = {p["phase"]: (p["offset_s"], p["seconds"]) for p in phases(hops)}
    assert list(found) == ["submit", "queue", "placement", "delivery", "start", "run", "metering", "charge"]
    assert found["submit"] == (0.0, 0.01)  # until the job's commit
    assert found["queue"] == (0.01, 0.005)
    assert found["placement"] == (0.015, 0.085)
    assert found["delivery"] == (0.1, 0.06)
    assert found["run"] == (0.161, 1.0)
    assert found["charge"] == (1.38, 0.049)


def test_json_names_each_span_with_its_offset(
    store: SpanStoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    show_trace(JOB, store.query_url, Output(Format.JSON))
    answer = json.loads(capsys.readouterr().out)
    assert answer["trace_ids"] == [T]
    first, placed = answer["spans"][0], answer["spans"][3]
    assert (first["service"], first["span"], first["offset_s"], first["duration_ms"]) == (
        "scheduling",
        SUBMIT,
        0,
        40,
    )
    assert (placed["service"], placed["offset_s"], placed["detail"]) == ("sensing", 0.16, "TaskPlaced")

    show_trace(JOB, store.query_url, Output(Format.TABLE))
    table = capsys.readouterr().out
    assert "where the time went" in table
    assert table.index("placements process") < table.index("billing.charge") < table.index("where the time")


def test_an_unknown_job_or_an_unreachable_store_is_one_line(
    store: SpanStoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as none:
        show_trace("job-2", store.query_url, Output())
    assert none.value.exit_code == 3 and "no spans tagged job_id=job-2" in capsys.readouterr().err
    with pytest.raises(typer.Exit) as away:
        show_trace(JOB, "http://127.0.0.1:9", Output())
    assert away.value.exit_code == 4 and "cannot reach the trace store" in capsys.readouterr().err
