"""One trace from SubmitJob to the consumer of the placement, on the real broker and PostgreSQL.

The hops covered: client span -> gRPC metadata -> the scheduler's SubmitJob server span -> the group
commit (``scheduling.commit``) -> the JobSubmitted outbox row -> the relay -> the record's ``traceparent``
header; then the scheduling cycle, which decides for the job in its submission's trace -> the TaskPlaced
outbox row -> the relay -> Kafka -> an `EventConsumer`, whose handler runs in a span continuing that trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from suanli import telemetry
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.bus import ConsumedEvent, EventConsumer
from suanli.infra.testing import recorded_spans
from suanli.telemetry.grpc import client_interceptors

from .helpers import TopicReader, capacity, config, publish, started, task_spec, until

pytestmark = pytest.mark.timeout(120)

SUBMIT = "suanli.scheduler.v1.Scheduler/SubmitJob"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    with recorded_spans("scheduling", monkeypatch) as exporter:
        yield exporter


def _ids(traceparent: bytes) -> tuple[str, str]:
    """(trace id, parent span id) of a W3C traceparent header."""
    _, trace_id, span_id, _ = traceparent.decode().split("-")
    return trace_id, span_id


def _hex(value: int, width: int = 32) -> str:
    return format(value, f"0{width}x")


def _only(exporter: InMemorySpanExporter, name: str, kind: trace.SpanKind | None = None) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name and (kind is None or s.kind is kind)]
    assert len(found) == 1, f"{name}: {len(found)} spans"
    return found[0]


async def test_placement_record_and_its_consumer_continue_the_submit_trace(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}", interceptors=client_interceptors())
    api = pb_grpc.SchedulerStub(channel)
    consumed: asyncio.Queue[tuple[ConsumedEvent, trace.SpanContext]] = asyncio.Queue()

    async def on_placement(event: ConsumedEvent) -> None:
        # What a downstream service (the agent) sees: the span its handler runs in.
        await consumed.put((event, trace.get_current_span().get_span_context()))

    placements_topic = f"{topic_prefix}.placements"
    consumer = EventConsumer(kafka_bootstrap, f"{topic_prefix}-trace-probe", [placements_topic], on_placement)
    try:
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1")
        )
        await until(lambda: _has_nodes(api), what="capacity view")
        async with consumer, TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.events") as jobs_events:
            with telemetry.tracer("tests").start_as_current_span("client") as client:
                job = (
                    await api.SubmitJob(
                        pb.SubmitJobRequest(spec=pb.JobSpec(name="traced", queue="acme", tasks=[task_spec()]))
                    )
                ).job
            event, handler_span = await asyncio.wait_for(_placement_of(consumed, job.id), 30)
            await jobs_events.wait_for(lambda n, r: n == "JobSubmitted" and r["job_id"] == job.id)
            [submitted_headers] = [
                h for n, r, h in jobs_events.records if n == "JobSubmitted" and r["job_id"] == job.id
            ]
    finally:
        await channel.close()
        await app.stop()
    if TREE:
        _print_tree(spans.get_finished_spans(), client.get_span_context().trace_id)

    trace_id = _hex(client.get_span_context().trace_id)
    submit = _only(spans, SUBMIT, trace.SpanKind.SERVER)
    assert _hex(submit.context.trace_id) == trace_id  # the client's context crossed the gRPC metadata
    assert submit.attributes is not None and submit.attributes["job_id"] == job.id

    # JobSubmitted: its outbox row kept the SubmitJob span, and the relay sent it as the header.
    assert _ids(submitted_headers["traceparent"]) == (trace_id, _hex(submit.context.span_id, 16))
    commits = [
        s
        for s in spans.get_finished_spans()
        if s.name == "scheduling.commit" and _hex(s.context.trace_id) == trace_id
    ]
    # Two commits in the trace: the submit's (JobSubmitted) inside SubmitJob, the cycle's (TaskPlaced)
    # inside the cycle's decision for the job, itself a child of SubmitJob linked to the cycle's span.
    decide = _only(spans, "scheduling.decide", trace.SpanKind.INTERNAL)
    assert decide.parent is not None and decide.parent.span_id == submit.context.span_id
    assert decide.attributes is not None and decide.attributes["job_id"] == job.id
    linked = {(link.context.trace_id, link.context.span_id) for link in decide.links}
    [cycle] = [s for s in spans.get_finished_spans() if (s.context.trace_id, s.context.span_id) in linked]
    assert cycle.name == "scheduling.cycle" and cycle.parent is None
    assert len(commits) >= 2
    assert {c.parent.span_id for c in commits if c.parent is not None} == {
        submit.context.span_id,
        decide.context.span_id,
    }

    # TaskPlaced: decided by a cycle in the job's trace; the record's parent is that decision.
    placed_trace, placed_parent = _ids(dict(event.headers)["traceparent"])
    assert (placed_trace, placed_parent) == (trace_id, _hex(decide.context.span_id, 16))
    assert event.record["job_id"] == job.id

    # The consumer's handler runs in a CONSUMER span whose parent is the span named in the header.
    assert _hex(handler_span.trace_id) == trace_id
    process = [
        s
        for s in spans.get_finished_spans()
        if s.name == f"{placements_topic} process" and s.context.span_id == handler_span.span_id
    ]
    assert len(process) == 1
    assert process[0].parent is not None and _hex(process[0].parent.span_id, 16) == placed_parent
    attributes = process[0].attributes or {}
    assert attributes["messaging.destination.name"] == placements_topic
    assert attributes["messaging.kafka.offset"] == event.offset
    assert attributes["suanli.event_name"] == "TaskPlaced"


async def _placement_of(
    queue: asyncio.Queue[tuple[ConsumedEvent, trace.SpanContext]], job_id: str
) -> tuple[ConsumedEvent, trace.SpanContext]:
    while True:
        event, span = await queue.get()
        if event.event_name == "TaskPlaced" and event.record.get("job_id") == job_id:
            return event, span


async def _has_nodes(api: pb_grpc.SchedulerStub) -> bool:
    return len((await api.ListNodes(pb.ListNodesRequest())).nodes) >= 1


TREE = False  # flip to print the trace while working on it


def _print_tree(finished: tuple[ReadableSpan, ...], trace_id: int) -> None:
    mine = [s for s in finished if s.context.trace_id == trace_id]
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in mine:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)

    def show(parent: int | None, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            print("  " * depth + f"{s.name} [{s.kind.name}]")
            show(s.context.span_id, depth + 1)

    show(None, 0)
