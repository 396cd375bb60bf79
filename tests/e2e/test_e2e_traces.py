"""End to end: one job's trace runs through every process of a real run, and `suanli job trace` shows it.

The platform (`Stack`, the processes `suanli up` starts) exports every span over OTLP/gRPC to the trace
store it starts (`suanli.telemetry.spanstore`: an in-process `TraceService` server). The test is a traced
client: it submits one job inside a CLIENT span of its own process, waits until the job has run and been
charged, then reads the job's trace from the store.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.infra.testing import outside_pytest_root
from suanli.platform.stack import Stack
from suanli.telemetry.otlp import GrpcSpanExporter
from suanli.telemetry.spanstore import StoredSpan
from suanli.telemetry.tracing import current_traceparent

from .kit import Platform, gpu_task, job_spec, stack_config, until

SUBMIT = "suanli.scheduler.v1.Scheduler/SubmitJob"
# The hops of one job, in the order they happen; each is (service.name, span name).
HOPS = (
    ("e2e-client", "submit"),
    ("scheduling", SUBMIT),
    ("scheduling", "scheduling.decide"),
    ("sensing", "placements process"),
    ("sensing", "sensing.start_task"),
    ("sensing", "tasks.lifecycle publish"),
    ("metering", "metering.tasks.lifecycle"),
    ("metering", "metering.window"),
    ("billing", "usage.metered process"),
    ("billing", "billing.charge"),
)
ENDED = ("sensing", "tasks.lifecycle publish")  # the task's end, whose window is charged


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    home = outside_pytest_root("suanli-e2e-traces-")
    with Stack(stack_config(home, traces=True, trace_export_delay_ms=200)) as started:
        yield started
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    platform = Platform(stack, stack.scheduler_addr)
    try:
        yield platform
    finally:
        await platform.close()


@pytest.fixture(scope="module")
def client_tracer(stack: Stack) -> Iterator[trace.Tracer]:
    """The test's own provider (not the process's globals), exporting to the platform's store at once."""
    assert stack.spans is not None
    provider = TracerProvider(
        resource=Resource.create({"service.name": "e2e-client", "process.pid": os.getpid()})
    )
    provider.add_span_processor(SimpleSpanProcessor(GrpcSpanExporter(stack.spans.otlp_endpoint)))
    try:
        yield provider.get_tracer("e2e")
    finally:
        provider.shutdown()


@pytest.fixture(scope="module")
def charged_job() -> dict[str, str]:
    """The job the first test ran and saw charged (the CLI test reads its trace)."""
    return {}


def _path_to_root(span: StoredSpan, by_id: dict[str, StoredSpan]) -> list[StoredSpan] | None:
    """``span`` and its ancestors up to the root; None while one of them has not arrived."""
    path = [span]
    while path[-1].parent_span_id:
        parent = by_id.get(path[-1].parent_span_id)
        if parent is None:
            return None
        path.append(parent)
    return path


def _settled(spans: list[StoredSpan]) -> StoredSpan | None:
    """The charge of the window the task's end closed, once its ancestry reached the root and its
    ChargeRecorded was relayed, and no span waits for its parent: each process exports on its own
    schedule, so a child may arrive before its parent."""
    by_id = {s.span_id: s for s in spans}
    if any(s.parent_span_id and s.parent_span_id not in by_id for s in spans):
        return None
    relayed = {s.parent_span_id for s in spans if s.name == "outbox.publish" and s.service == "billing"}
    return next(
        (
            s
            for s in spans
            if s.name == "billing.charge" and s.span_id in relayed and _ended_by(s, by_id) == "TaskFinished"
        ),
        None,
    )


def _ended_by(charge: StoredSpan, by_id: dict[str, StoredSpan]) -> str | None:
    """The lifecycle event a charge's window descends from (None while its ancestry is incomplete)."""
    path = _path_to_root(charge, by_id)
    if path is None or len(path) != len(HOPS):
        return None
    name = list(reversed(path))[HOPS.index(ENDED)].attributes.get("suanli.event_name")
    return None if name is None else str(name)


def _describe(spans: list[StoredSpan]) -> str:
    return "\n".join(
        f"{s.service:10} {s.name:45} {s.span_id} <- {s.parent_span_id or '-':16} links={len(s.links)}"
        for s in spans
    )


async def test_one_trace_runs_from_submit_to_charge(
    stack: Stack, platform: Platform, client_tracer: trace.Tracer, charged_job: dict[str, str]
) -> None:
    await platform.ready_nodes(1)
    # Two seconds: the task's end comes well after its placement and terms reached metering, so the end
    # is what closes its last usage window.
    spec = job_spec("traced", gpu_task("t", duration_s=2.0))
    with client_tracer.start_as_current_span("submit", kind=trace.SpanKind.CLIENT) as client:
        traceparent = current_traceparent()
        assert traceparent is not None
        job = (
            await platform.api().SubmitJob(
                pb.SubmitJobRequest(spec=spec, request_id=secrets.token_hex(8)),
                metadata=(("traceparent", traceparent),),
                timeout=10,
            )
        ).job
    trace_id = format(client.get_span_context().trace_id, "032x")
    done = await platform.wait_final([job.id], timeout=40)
    assert done[job.id].state == pb.JOB_STATE_SUCCEEDED
    assert stack.spans is not None
    store = stack.spans.store

    async def settled() -> list[StoredSpan] | None:
        spans = store.trace(trace_id)
        return spans if _settled(spans) is not None else None

    try:
        spans = await until(settled, 30, "the job's charge relayed in its trace", every=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_describe(store.trace(trace_id))}") from None
    charged_job["job_id"] = job.id
    by_id = {s.span_id: s for s in spans}
    picture = _describe(spans)

    # Parent links: one root (the client's span); every other span's parent is a span of this trace.
    roots = [s for s in spans if not s.parent_span_id]
    assert [(r.service, r.name) for r in roots] == [("e2e-client", "submit")], picture
    assert all(s.parent_span_id in by_id for s in spans if s.parent_span_id), picture

    # One trace id across at least five processes, each of them a service of the run.
    processes = {s.process for s in spans}
    assert len(processes) >= 5, picture
    assert {"e2e-client", "scheduling", "sensing", "metering", "billing"} <= {s.service for s in spans}

    # Every charge of the job descends, parent by parent, from the submission through every hop, in this
    # order: the window the task's end closed through its TaskFinished, one a snapshot closed (the task
    # crossed a minute) through the TaskStarted, whose trace metering keeps with the attempt.
    charges = [s for s in spans if s.name == "billing.charge"]
    assert charges and all(c.attributes["job_id"] == job.id for c in charges), picture
    for each in charges:
        path = list(reversed(_path_to_root(each, by_id) or []))
        assert [(s.service, s.name) for s in path] == list(HOPS), picture
        assert _ended_by(each, by_id) in {"TaskStarted", "TaskFinished"}, picture
    charge = _settled(spans)
    assert charge is not None, picture
    path = list(reversed(_path_to_root(charge, by_id) or []))

    # The cycle that placed the job is a span of its own (a root of another trace) that the job's
    # decision links to; the decision is the parent of the placement the agent consumed.
    decide = next(s for s in path if s.name == "scheduling.decide")
    assert decide.attributes["job_id"] == job.id
    linked = [store.trace(t) for t, _ in decide.links]
    cycles = [s for spans_of in linked for s in spans_of if (s.trace_id, s.span_id) in decide.links]
    assert [c.name for c in cycles] == ["scheduling.cycle"] and not cycles[0].parent_span_id

    # TaskStarted reached metering in this trace too; ChargeRecorded was relayed in the charge's.
    started = [s for s in spans if s.attributes.get("suanli.event_name") == "TaskStarted"]
    published = next(s for s in started if s.kind == "producer")
    assert any(s.service == "metering" and s.parent_span_id == published.span_id for s in spans), picture
    relayed = [s for s in spans if s.name == "outbox.publish" and s.service == "billing"]
    assert any(
        s.parent_span_id == charge.span_id and "billing.events" in s.attributes["messaging.destination.names"]
        for s in relayed
    ), picture

    # A consumer is the child of the span that wrote its record, in another process: the outbox relay
    # sends a row with its writer's context, so the relay's own span is not the consumer's parent.
    consumers = [s for s in spans if s.kind == "consumer"]
    assert consumers and all(by_id[c.parent_span_id].process != c.process for c in consumers), picture
    assert all(by_id[c.parent_span_id].name != "outbox.publish" for c in consumers), picture


def test_job_trace_prints_the_hops_in_order(stack: Stack, charged_job: dict[str, str]) -> None:
    job_id = charged_job.get("job_id")
    assert job_id, "runs after test_one_trace_runs_from_submit_to_charge, on the job it charged"
    assert stack.client_config is not None
    env = {**os.environ, "SUANLI_CONFIG": str(stack.client_config)}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "suanli.cli.main", "job", "trace", job_id, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    answer = json.loads(cli("-o", "json"))
    assert answer["job_id"] == job_id
    assert [p["phase"] for p in answer["phases"]] == [
        "submit", "queue", "placement", "delivery", "start", "run", "metering", "charge",
    ], json.dumps(answer, indent=1)  # fmt: skip
    assert all(p["seconds"] >= 0 for p in answer["phases"])
    assert 1.9 <= next(p["seconds"] for p in answer["phases"] if p["phase"] == "run") < 10

    # The hops from the submission to the charge, parent by parent, with their offsets in time order.
    # (Every usage window of the task is in the job's trace, also one a snapshot closed when the task
    # crossed a minute: metering keeps the trace of the attempt's start.)
    spans = {s["span_id"]: s for s in answer["spans"]}
    submitted = next(s["trace_id"] for s in answer["spans"] if s["span"] == SUBMIT)
    path = [next(s for s in answer["spans"] if s["span"] == "billing.charge" and s["trace_id"] == submitted)]
    while path[-1]["parent_span_id"]:
        path.append(spans[path[-1]["parent_span_id"]])
    path.reverse()
    assert [(s["service"], s["span"]) for s in path] == list(HOPS)
    assert [s["offset_s"] for s in path] == sorted(s["offset_s"] for s in path)

    # The table a person reads lists those hops in the same order.
    table = cli("-o", "wide")
    lines = table.splitlines()
    rows = [next(i for i, line in enumerate(lines) if s["span_id"] in line.split()) for s in path]
    assert rows == sorted(rows), table
    assert "where the time went" in table, table
