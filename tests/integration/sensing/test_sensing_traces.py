"""The agent continues the scheduler's trace: a TaskPlaced sent in a span is started in a
``sensing.start_task`` span of that trace, and the TaskStarted it publishes carries the trace on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from suanli import telemetry
from suanli.bus import EventPublisher, topic_name
from suanli.bus.headers import header
from suanli.infra.testing import recorded_spans
from suanli.resources import default_catalogue
from suanli.sensing.adapters.bus import ensure_agent_topics
from suanli.sensing.bootstrap import build_fleet_host
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.entrypoints.runtime import RunSettings

from .test_sensing_agent_bus import FAST, FLEET, placed, running, tail

NODE = "north-s1-gpu-001"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    with recorded_spans("sensing", monkeypatch) as exporter:
        yield exporter


async def test_agent_starts_a_placed_task_in_the_placements_trace(
    kafka_bootstrap: str, topic_prefix: str, spans: InMemorySpanExporter
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    fleet = parse_fleet(FLEET, default_catalogue())
    settings = RunSettings(
        kafka_bootstrap,
        f"{topic_prefix}-fleet",
        topic_prefix,
        interval_s=0.5,
        probe_interval_s=1.0,
        consumer=FAST,
    )
    topics = [topic_name(t, topic_prefix) for t in ("node.snapshots", "tasks.lifecycle")]
    async with (
        tail(kafka_bootstrap, *topics) as seen,
        running(
            settings, lambda sink: build_fleet_host(fleet, sink, interval_s=0.5, default_duration_s=300.0)
        ),
    ):
        await seen.until(lambda: len(seen.named("NodeRegistered")) == 6, "NodeRegistered per node")
        record = placed(NODE, "traced-task", ["train"])
        record["devices"] = [{"index": 0, "milli": 1000}]
        async with EventPublisher(kafka_bootstrap) as bus:
            with telemetry.tracer("tests").start_as_current_span("scheduler") as scheduler:
                await bus.publish(topic_name("placements", topic_prefix), NODE, "TaskPlaced", record)
        await seen.until(
            lambda: any(r["task_id"] == "traced-task" for r in seen.named("TaskStarted")), "start"
        )

    trace_id = format(scheduler.get_span_context().trace_id, "032x")
    [start] = [s for s in spans.get_finished_spans() if s.name == "sensing.start_task"]
    assert format(start.context.trace_id, "032x") == trace_id
    assert start.attributes is not None
    assert (start.attributes["task_id"], start.attributes["node_id"]) == ("traced-task", NODE)
    [process] = [
        s for s in spans.get_finished_spans() if start.parent and s.context.span_id == start.parent.span_id
    ]
    assert process.kind is trace.SpanKind.CONSUMER  # the agent's `placements process` span

    [started_headers] = [
        h for _, name, r, h in seen.events if name == "TaskStarted" and r["task_id"] == "traced-task"
    ]
    traceparent = header(started_headers, "traceparent")
    assert traceparent is not None and traceparent.split("-")[1] == trace_id
