"""Staggered reporting: a fleet's nodes report once per interval each, spread over the interval.

The report loop runs on an injected clock whose pauses advance time, so the test takes no real time and
every instant is exact.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import uuid
from collections import Counter, defaultdict
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli import contracts
from suanli.infra.polling import until
from suanli.resources import default_catalogue
from suanli.sensing.adapters.metrics import AgentMetrics
from suanli.sensing.bootstrap import build_fleet_host
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.entrypoints.runtime import RunSettings, report_loop
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.schedule import ReportSchedule

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
INTERVAL_S = 1.0
GAP_S = 0.1  # 10 slices per interval
NODES = 12  # two more than slices: two slices hold two nodes

FLEET = {
    "name": "stagger",
    "seed": 5,
    "regions": [
        {
            "name": "r1",
            "sites": [
                {
                    "name": "a",
                    "node_groups": [{"name": "g", "count": NODES, "gpu_model": "T4", "gpus_per_node": 1}],
                }
            ],
        }
    ],
}


class FakeTime:
    """Monotonic seconds and the wall clock (a `Clock`) derived from them; a pause moves time on (stop at
    ``end_s``)."""

    def __init__(self, end_s: float) -> None:
        self.t = 0.0
        self.end_s = end_s

    def monotonic(self) -> float:
        return self.t

    def now(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.t)

    async def pause(self, stop: asyncio.Event, seconds: float) -> None:
        # What is in flight (the slices' publishes run in the background) gets its turns before time moves
        # on, as a real pause would give it.
        for _ in range(5):
            await asyncio.sleep(0)
        self.t += max(0.0, seconds)
        if self.t >= self.end_s - 1e-9:
            stop.set()


class Sink:
    """Records what was published; the broker is away (publish raises) for ``away`` seconds."""

    def __init__(self, time: FakeTime, *, away: tuple[float, float] = (0.0, 0.0)) -> None:
        self.time = time
        self.away = away
        self.attempts = 0
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        self.attempts += 1
        if self.away[0] <= self.time.t < self.away[1]:
            raise ConnectionError("broker away")
        contracts.encode(event_name, record)
        self.events.append((event_name, record))

    def snapshot_times(self) -> dict[str, list[float]]:
        """Seconds since T0 at which each node's snapshots were taken (their occurred_at)."""
        times: dict[str, list[float]] = defaultdict(list)
        for name, record in self.events:
            if name == "NodeSnapshot":
                times[record["node_id"]].append((record["occurred_at"] - T0).total_seconds())
        return times


def fleet(time: FakeTime, sink: Sink) -> AgentHost:
    counter = itertools.count()
    return build_fleet_host(
        parse_fleet(FLEET, default_catalogue()),
        sink,
        interval_s=INTERVAL_S,
        default_duration_s=300.0,
        clock=time,
        ids=lambda: uuid.UUID(int=next(counter)),
    )


def run_settings(self_fence_s: float = 0.0) -> RunSettings:
    return RunSettings(
        "unused:9092",
        "g",
        None,
        interval_s=INTERVAL_S,
        min_report_gap_s=GAP_S,
        probe_interval_s=3600.0,
        self_fence_s=self_fence_s,
    )


async def run_loop(time: FakeTime, sink: Sink, meter: metrics.Meter | None = None) -> list[str]:
    host = fleet(time, sink)
    settings = run_settings()
    agent_metrics = AgentMetrics(host, meter) if meter is not None else None
    await report_loop(
        host, settings, asyncio.Event(), monotonic=time.monotonic, pause=time.pause, metrics=agent_metrics
    )
    return list(host.agents)


def test_schedule_deals_nodes_round_robin_into_evenly_spaced_slices() -> None:
    nodes = [f"n{i:03d}" for i in range(200)]
    schedule = ReportSchedule(nodes, 5.0, min_gap_s=0.05)
    assert len(schedule.slices) == 100 and schedule.tick_s == pytest.approx(0.05)
    assert sorted(itertools.chain.from_iterable(schedule.slices)) == nodes  # each node exactly once
    assert schedule.slice(0) == ("n000", "n100") and schedule.slice(101) == ("n001", "n101")
    assert schedule.phase_s("n007") == pytest.approx(0.35)
    # Fewer nodes than the gap allows: one node per slice, the interval split evenly between them.
    few = ReportSchedule(["a", "b", "c", "d"], 2.0, min_gap_s=0.05)
    assert few.slices == (("a",), ("b",), ("c",), ("d",)) and few.tick_s == pytest.approx(0.5)
    assert ReportSchedule([], 5.0).slice(3) == ()


async def test_fleet_reports_each_node_once_per_interval_on_its_own_phase() -> None:
    time = FakeTime(end_s=3 * INTERVAL_S)
    sink = Sink(time)
    nodes = await run_loop(time, sink)

    times = sink.snapshot_times()
    assert set(times) == set(nodes)
    for node, taken in times.items():
        assert len(taken) == 3, node
        phase = taken[0]
        # occurred_at is the moment the snapshot was taken: the node's phase in every interval.
        assert taken == pytest.approx([phase, phase + INTERVAL_S, phase + 2 * INTERVAL_S]), node
        assert 0.0 <= phase < INTERVAL_S
    phases = Counter(round(taken[0], 6) for taken in times.values())
    assert sorted(phases) == pytest.approx([k * GAP_S for k in range(10)])  # evenly spaced
    assert max(phases.values()) == 2  # never more than ceil(12 / 10) snapshots at one instant
    assert [node for node, taken in times.items() if taken[0] == 0.0] == [nodes[0], nodes[10]]


async def test_a_failed_registration_is_retried_one_interval_later_not_every_tick() -> None:
    time = FakeTime(end_s=2 * INTERVAL_S)
    sink = Sink(time, away=(0.0, 0.5))
    await run_loop(time, sink)

    registered = [r for name, r in sink.events if name == "NodeRegistered"]
    assert len(registered) == NODES
    taken = [(r["occurred_at"] - T0).total_seconds() for r in registered]
    assert taken == pytest.approx([INTERVAL_S] * NODES)
    # One failed registration (all nodes at once) in the first interval, not one per tick.
    assert sink.attempts - len(sink.events) == NODES
    first = sorted(taken[0] for taken in sink.snapshot_times().values())
    assert first[0] == pytest.approx(INTERVAL_S)


async def test_nodes_whose_report_failed_report_at_their_next_turn_and_the_others_keep_theirs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime(end_s=3 * INTERVAL_S)
    sink = Sink(time, away=(1.25, 1.75))  # the slices due at 1.3 .. 1.7 fail
    await run_loop(time, sink)

    times = sink.snapshot_times()
    failed = {node for node, taken in times.items() if 0.25 < taken[0] < 0.75}
    assert len(failed) == 5
    for node, taken in times.items():
        phase = taken[0]
        expected = [phase, phase + 2 * INTERVAL_S] if node in failed else [phase + k for k in range(3)]
        assert taken == pytest.approx(expected), node
    # No node goes unreported for more than two intervals (metering takes three silent ones as LOST).
    assert max(b - a for taken in times.values() for a, b in itertools.pairwise(taken)) <= 2 * INTERVAL_S
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "next turn" in errors[0].getMessage()  # once per outage, not per slice


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


async def test_the_agent_metrics_count_every_snapshot_sent_or_failed_and_time_each_slice() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    time = FakeTime(end_s=3.0)
    sink = Sink(time, away=(1.25, 1.75))  # the slices due at 1.3 .. 1.7 fail
    await run_loop(time, sink, provider.get_meter("test"))
    points = _points(reader)
    snapshots = {p.attributes["outcome"]: p.value for p in points["suanli_agent_snapshots_total"]}
    sent = sum(1 for name, _ in sink.events if name == "NodeSnapshot")
    assert snapshots["sent"] == sent
    assert snapshots["failed"] == 5  # the five nodes whose turn fell in the outage (test above)
    (latency,) = points["suanli_agent_report_seconds"]
    assert latency.count > 0 and latency.sum == 0.0  # the fake sink acknowledges at once
    assert [p.value for p in points["suanli_agent_tasks_running"]] == [0]
    assert [p.value for p in points["suanli_agent_orders_refused_total"]] == [0]
    provider.shutdown()


async def _running_task(host: AgentHost) -> str:
    node = next(iter(host.agents))
    record = {
        "task_id": "t1",
        "job_id": "job-1",
        "node_id": node,
        "attempt": 1,
        "devices": [],
        "requests": {"cpu_milli": 1000, "memory_mib": 1024},
        "command": None,
        "env": None,
    }
    assert await host.handle_order("TaskPlaced", record, key=node)
    assert host.tasks_running() == 1
    return node


@pytest.mark.parametrize(("self_fence_s", "running"), [(3.0, 0), (0.0, 1), (10.0, 1)])
async def test_an_agent_that_delivers_nothing_for_its_self_fence_time_stops_every_task(
    self_fence_s: float, running: int, caplog: pytest.LogCaptureFixture
) -> None:
    # The broker is away from 1 s to 6 s: past a 3 s self-fence the node may have been taken for lost
    # and its task requeued elsewhere, so it is stopped; with 0 (never) or 10 s it keeps running.
    time = FakeTime(end_s=8.0)
    sink = Sink(time, away=(1.0, 6.0))
    host = fleet(time, sink)
    await _running_task(host)
    await report_loop(
        host, run_settings(self_fence_s), asyncio.Event(), monotonic=time.monotonic, pause=time.pause
    )
    for _ in range(5):
        await asyncio.sleep(0)  # the stopped task's watcher reports its end
    assert host.tasks_running() == running
    fenced = [r for r in caplog.records if "self-fence" in r.getMessage()]
    assert len(fenced) == (1 - running)  # once per outage, not once per tick
    if not running:
        assert fenced[0].getMessage().startswith("no snapshot acknowledged for 3.")

        async def reported() -> list[dict[str, Any]]:  # its end, retried until the broker is back
            return [r for n, r in sink.events if n == "TaskFailed"]

        ended = await until(reported, 10.0, "the fenced task's end reported")
        assert [(r["task_id"], r["kind"]) for r in ended] == [("t1", "KILLED")]
        assert ended[0]["reason"].startswith("self-fenced: no snapshot acknowledged for 3.")
