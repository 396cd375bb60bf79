"""The agent's use cases over an in-memory sink: registration, snapshots, usage, running and stopping tasks.

Simulated tasks run on the event loop; real tasks are real subprocesses (cheap: `python -c`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context

from suanli import contracts
from suanli.bus import ConsumedEvent
from suanli.clock import IdFactory, ManualClock
from suanli.resources import default_catalogue
from suanli.sensing.adapters.host import HostCollector
from suanli.sensing.adapters.processes import ProcessLauncher, ProcessUsageProbe
from suanli.sensing.bootstrap import build_fleet_host
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.placement import InvalidOrder, parse_placement
from suanli.sensing.entrypoints.orders import OrderHandler
from suanli.sensing.service_layer.agent import AgentSettings, NodeAgent
from suanli.sensing.service_layer.host import AgentHost

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)

FLEET = {
    "name": "unit",
    "seed": 3,
    "regions": [
        {
            "name": "r1",
            "sites": [
                {
                    "name": "a",
                    "node_groups": [
                        {"name": "g", "count": 2, "gpu_model": "A100 80GB SXM", "gpus_per_node": 4}
                    ],
                }
            ],
        },
        {"name": "r2", "sites": [{"name": "b", "node_groups": [{"name": "c", "count": 1}]}]},
    ],
}


class RecordingSink:
    """Keeps what was published, after proving each record encodes against its contract."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        contracts.encode(event_name, record)
        self.events.append((event_name, record))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for n, r in self.events if n == name]


fixed_clock = ManualClock(T0)


def counter_ids() -> IdFactory:
    counter = itertools.count()
    return lambda: uuid.UUID(int=next(counter))


async def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.02)


def order(
    node_id: str,
    task_id: str,
    *,
    devices: list[dict[str, int]] | None = None,
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
    attempt: int = 1,
    event_name: str = "TaskPlaced",
) -> tuple[str, dict[str, Any]]:
    record: dict[str, Any] = {
        "task_id": task_id,
        "job_id": "job-1",
        "node_id": node_id,
        "attempt": attempt,
        "devices": devices or [],
        "requests": {"cpu_milli": 2000, "memory_mib": 4096},
        "command": command,
        "env": env,
    }
    if event_name == "TaskPreempted":
        record = {k: record[k] for k in ("task_id", "job_id", "node_id", "attempt")} | {"reason": "quota"}
    return event_name, record


def fleet_host(sink: RecordingSink) -> AgentHost:
    fleet = parse_fleet(FLEET, default_catalogue())
    return build_fleet_host(
        fleet, sink, interval_s=1.0, default_duration_s=300.0, clock=fixed_clock, ids=counter_ids()
    )


async def test_fleet_registers_and_reports_every_node() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.report_all()
    registered = {r["node_id"]: r for r in sink.named("NodeRegistered")}
    assert set(registered) == {"a-g-001", "a-g-002", "b-c-001"}
    assert len(registered["a-g-001"]["devices"]) == 4 and registered["b-c-001"]["devices"] == []
    assert registered["a-g-001"]["labels"]["suanli.io/agent-mode"] == "simulated"
    snapshots = sink.named("NodeSnapshot")
    assert {s["node_id"] for s in snapshots} == set(registered)
    assert all(s["sequence"] == 1 and s["report_interval_ms"] == 1000 for s in snapshots)
    assert {s["region"] for s in snapshots} == {"r1", "r2"}
    assert await host.probe_links() == 2
    assert {(r["src_site"], r["dst_site"]) for r in sink.named("LinkMeasured")} == {("a", "b"), ("b", "a")}


async def test_simulated_task_runs_for_its_duration_and_shows_in_snapshots() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    name, record = order(
        "a-g-001", "t1", devices=[{"index": 1, "milli": 1000}], env={"SUANLI_SIM_DURATION_S": "30"}
    )
    assert await host.handle_order(name, record)
    (started,) = sink.named("TaskStarted")
    assert started["device_indices"] == [1] and started["node_id"] == "a-g-001"
    await host.report_all()
    snapshot = next(s for s in sink.named("NodeSnapshot") if s["node_id"] == "a-g-001")
    assert snapshot["task_ids"] == ["t1"]
    assert snapshot["devices"][1]["utilisation_pct"] > 0 and snapshot["devices"][0]["utilisation_pct"] == 0
    (usage,) = sink.named("UsageSampled")
    assert usage["task_id"] == "t1" and usage["gpu_utilisation_pct"] > 0 and usage["cpu_milli"] > 0
    await host.handle_order(*order("a-g-001", "t1", event_name="TaskPreempted"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    (failed,) = sink.named("TaskFailed")
    assert failed["kind"] == "KILLED" and "quota" in failed["reason"]
    await host.shutdown()


async def test_short_simulated_task_finishes_with_zero() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(*order("b-c-001", "t2", env={"SUANLI_SIM_DURATION_S": "0"}))
    await eventually(lambda: bool(sink.named("TaskFinished")))
    assert sink.named("TaskFinished")[0]["exit_code"] == 0
    assert host.agents["b-c-001"].table.task_ids() == []


async def test_orders_for_other_nodes_are_skipped_and_bad_ones_raise() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    assert not await host.handle_order(*order("elsewhere", "t3"))
    with pytest.raises(InvalidOrder):
        await host.handle_order("JobSubmitted", {"node_id": "a-g-001"})
    with pytest.raises(InvalidOrder):
        await host.handle_order(*order("a-g-001", "t4", attempt=0))
    await host.handle_order(*order("a-g-001", "t5", devices=[{"index": 9, "milli": 1000}]))
    (refused,) = sink.named("TaskFailed")
    assert refused["task_id"] == "t5" and "no device [9]" in refused["reason"]


def real_agent(sink: RecordingSink, tmp_path: Path, grace_s: float = 5.0) -> NodeAgent:
    return NodeAgent(
        NodeIdentity("real-1", "r", "z", "s"),
        HostCollector(),
        ProcessLauncher("real-1", log_dir=tmp_path),
        ProcessUsageProbe(),
        sink,
        clock=fixed_clock,
        ids=counter_ids(),
        settings=AgentSettings(interval_s=1.0, stop_grace_s=grace_s),
    )


async def test_real_task_gets_its_environment_and_reports_its_exit_code(tmp_path: Path) -> None:
    sink = RecordingSink()
    agent = real_agent(sink, tmp_path)
    await agent.register()
    host = AgentHost([agent], sink, clock=fixed_clock, ids=counter_ids())
    script = (
        "import os, sys; "
        "sys.exit(3 if os.environ['CUDA_VISIBLE_DEVICES'] == '' and os.environ['X'] == 'y' else 1)"
    )
    await host.handle_order(*order("real-1", "p1", command=[sys.executable, "-c", script], env={"X": "y"}))
    await eventually(lambda: bool(sink.named("TaskFinished")))
    (started,) = sink.named("TaskStarted")
    assert isinstance(started["pid"], int)
    assert sink.named("TaskFinished")[0]["exit_code"] == 3


async def test_real_task_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    sink = RecordingSink()
    agent = real_agent(sink, tmp_path)
    await agent.register()
    host = AgentHost([agent], sink, clock=fixed_clock, ids=counter_ids())
    await host.handle_order(*order("real-1", "p2", command=["/nonexistent/binary"]))
    await host.handle_order(*order("real-1", "p3", command=None))
    failed = {r["task_id"]: r for r in sink.named("TaskFailed")}
    assert "/nonexistent/binary" in failed["p2"]["reason"] and "no command" in failed["p3"]["reason"]
    assert sink.named("TaskStarted") == []


async def test_stop_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    sink = RecordingSink()
    agent = real_agent(sink, tmp_path, grace_s=0.3)
    await agent.register()
    host = AgentHost([agent], sink, clock=fixed_clock, ids=counter_ids())
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    await host.handle_order(*order("real-1", "p4", command=[sys.executable, "-u", "-c", stubborn]))
    log = tmp_path / "p4.1.log"
    await eventually(lambda: log.exists() and "ready" in log.read_text())
    await agent.report()
    (usage,) = sink.named("UsageSampled")
    assert usage["memory_used_mib"] > 0
    await host.handle_order(*order("real-1", "p4", event_name="TaskPreempted"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    (failed,) = sink.named("TaskFailed")
    assert failed["kind"] == "KILLED" and failed["exit_code"] == -9


async def test_an_order_before_registration_still_sees_the_devices() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.handle_order(*order("a-g-002", "early", devices=[{"index": 3, "milli": 500}]))
    assert [r["task_id"] for r in sink.named("TaskStarted")] == ["early"]
    await host.shutdown()
    assert sink.named("TaskFailed")[0]["kind"] == "KILLED"


# -- TaskStopRequested (cancel, a gang sibling ended, reconciliation) and TaskPlaced v2's duration_s ------
# The end of a stopped task is reported as TaskFailed(KILLED): the scheduler records any end of a task it
# is stopping as STOPPED, and a simulated task releases its room at once.


def stop_request(
    node_id: str, task_id: str, *, attempt: int = 1, job_id: str = "job-1", reason: str = "job cancelled"
) -> tuple[str, dict[str, Any]]:
    return "TaskStopRequested", {
        "task_id": task_id,
        "job_id": job_id,
        "node_id": node_id,
        "attempt": attempt,
        "reason": reason,
    }


async def test_stop_request_releases_a_simulated_task_and_reports_it_killed() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(
        *order("a-g-001", "t1", devices=[{"index": 0, "milli": 1000}], env={"SUANLI_SIM_DURATION_S": "300"})
    )
    agent = host.agents["a-g-001"]
    assert agent.table.task_ids() == ["t1"]
    assert await host.handle_order(*stop_request("a-g-001", "t1"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    (failed,) = sink.named("TaskFailed")
    assert failed["kind"] == "KILLED" and failed["attempt"] == 1
    assert failed["reason"] == "stopped: job cancelled" and failed["exit_code"] == -15
    # The room is free again: the next snapshot no longer lists the task, and the device takes a new one.
    assert agent.table.task_ids() == [] and agent.table.milli_by_device() == {}
    await host.handle_order(*order("a-g-001", "t2", devices=[{"index": 0, "milli": 1000}]))
    assert [r["task_id"] for r in sink.named("TaskStarted")] == ["t1", "t2"]
    await host.shutdown()


async def test_attempt_zero_stops_whatever_attempt_runs_and_needs_no_job_id() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(*order("a-g-002", "t3", attempt=4, env={"SUANLI_SIM_DURATION_S": "300"}))
    # Reconciliation found a task the scheduler does not know: job id empty, attempt 0.
    await host.handle_order(*stop_request("a-g-002", "t3", attempt=0, job_id="", reason="unknown task"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    (failed,) = sink.named("TaskFailed")
    assert failed["attempt"] == 4 and failed["kind"] == "KILLED" and "unknown task" in failed["reason"]


async def test_stop_for_another_attempt_or_an_absent_task_changes_nothing() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(*order("a-g-001", "t4", attempt=2, env={"SUANLI_SIM_DURATION_S": "300"}))
    await host.handle_order(*stop_request("a-g-001", "t4", attempt=1))
    await host.handle_order(*stop_request("a-g-001", "nowhere", attempt=0))
    assert host.agents["a-g-001"].table.task_ids() == ["t4"]
    assert sink.named("TaskFailed") == []
    await host.shutdown()


async def test_a_placement_stopped_before_it_arrived_is_not_started() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(*stop_request("a-g-001", "t5", attempt=1))
    await host.handle_order(*order("a-g-001", "t5", attempt=1, env={"SUANLI_SIM_DURATION_S": "300"}))
    assert sink.named("TaskStarted") == [] and host.agents["a-g-001"].table.task_ids() == []
    # A later attempt is a new placement and runs.
    await host.handle_order(*order("a-g-001", "t5", attempt=2, env={"SUANLI_SIM_DURATION_S": "300"}))
    assert [r["attempt"] for r in sink.named("TaskStarted")] == [2]
    await host.shutdown()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"attempt": -1}, "attempt must be an integer >= 0"),
        ({"task_id": ""}, "task_id must be"),
        ({"node_id": None}, "without a node_id"),
    ],
)
async def test_a_stop_request_the_agent_cannot_act_on_raises(change: dict[str, Any], message: str) -> None:
    host = fleet_host(RecordingSink())
    name, record = stop_request("a-g-001", "t6")
    with pytest.raises(InvalidOrder, match=message):
        await host.handle_order(name, record | change)


async def test_stop_request_terminates_a_real_process_group(tmp_path: Path) -> None:
    sink = RecordingSink()
    agent = real_agent(sink, tmp_path, grace_s=5.0)
    await agent.register()
    host = AgentHost([agent], sink, clock=fixed_clock, ids=counter_ids())
    waits = "import time; print('ready', flush=True); time.sleep(60)"
    await host.handle_order(*order("real-1", "p1", command=[sys.executable, "-u", "-c", waits]))
    log = tmp_path / "p1.1.log"
    await eventually(lambda: log.exists() and "ready" in log.read_text())
    await host.handle_order(*stop_request("real-1", "p1", attempt=0))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    (failed,) = sink.named("TaskFailed")
    # SIGTERM was enough: the process ended by it, well inside the grace period.
    assert failed["kind"] == "KILLED" and failed["exit_code"] == -15
    assert agent.table.task_ids() == []


async def test_stop_request_escalates_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    sink = RecordingSink()
    agent = real_agent(sink, tmp_path, grace_s=0.3)
    await agent.register()
    host = AgentHost([agent], sink, clock=fixed_clock, ids=counter_ids())
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    await host.handle_order(*order("real-1", "p2", command=[sys.executable, "-u", "-c", stubborn]))
    log = tmp_path / "p2.1.log"
    await eventually(lambda: log.exists() and "ready" in log.read_text())
    await host.handle_order(*stop_request("real-1", "p2"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    assert sink.named("TaskFailed")[0]["exit_code"] == -9


async def test_placement_duration_wins_over_the_environment() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    name, record = order("b-c-001", "d1", env={"SUANLI_SIM_DURATION_S": "300"})
    await host.handle_order(name, record | {"duration_s": 0.0})
    await eventually(lambda: bool(sink.named("TaskFinished")))
    assert sink.named("TaskFinished")[0]["exit_code"] == 0


def test_duration_falls_back_to_the_environment_then_the_default_and_is_validated() -> None:
    _, record = order("n", "d2", env={"SUANLI_SIM_DURATION_S": "12"})
    assert parse_placement(record).sim_duration_s(300.0) == 12.0
    assert parse_placement(record | {"duration_s": 2.5}).sim_duration_s(300.0) == 2.5
    assert parse_placement(order("n", "d3")[1]).sim_duration_s(300.0) == 300.0
    with pytest.raises(InvalidOrder, match="duration_s must be a number >= 0"):
        parse_placement(record | {"duration_s": -1.0})


# -- the scheduler's placement wins over what it no longer expects on the node ---------------------------
# (a node taken for lost while only the broker was away keeps running the old attempts; the new
# placements must not be refused, or the jobs would fail for an infrastructure blip)


async def test_a_newer_attempt_supersedes_the_old_one_still_running() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    devices = [{"index": 0, "milli": 1000}]
    await host.handle_order(
        *order("a-g-001", "t1", attempt=1, devices=devices, env={"SUANLI_SIM_DURATION_S": "300"})
    )
    await host.handle_order(
        *order("a-g-001", "t1", attempt=2, devices=devices, env={"SUANLI_SIM_DURATION_S": "300"})
    )
    (ended,) = sink.named("TaskFailed")
    assert (ended["attempt"], ended["kind"]) == (1, "KILLED") and "superseded" in ended["reason"]
    assert [(r["task_id"], r["attempt"]) for r in sink.named("TaskStarted")] == [("t1", 1), ("t1", 2)]
    assert host.agents["a-g-001"].table.get("t1").placement.attempt == 2  # type: ignore[union-attr]
    # A late redelivery of the old attempt changes nothing.
    await host.handle_order(*order("a-g-001", "t1", attempt=1, devices=devices))
    assert len(sink.named("TaskStarted")) == 2 and len(sink.named("TaskFailed")) == 1
    await host.shutdown()


async def test_a_placement_on_a_device_held_by_a_stale_task_stops_that_task() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    env = {"SUANLI_SIM_DURATION_S": "300"}
    await host.handle_order(*order("a-g-001", "old", devices=[{"index": 2, "milli": 700}], env=env))
    await host.handle_order(*order("a-g-001", "keep", devices=[{"index": 3, "milli": 500}], env=env))
    await host.handle_order(*order("a-g-001", "new", devices=[{"index": 2, "milli": 600}], env=env))
    (ended,) = sink.named("TaskFailed")
    assert ended["task_id"] == "old" and ended["kind"] == "KILLED"
    assert host.agents["a-g-001"].table.task_ids() == ["keep", "new"]
    assert host.agents["a-g-001"].table.milli_by_device() == {2: 600, 3: 500}
    await host.shutdown()


class FlakySink(RecordingSink):
    """Fails the first ``failures`` publishes, as a producer does while the broker is away."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("broker away")
        await super().publish(event_name, record)


async def test_a_task_end_is_retried_until_published() -> None:
    sink = FlakySink(failures=0)
    fleet = parse_fleet(FLEET, default_catalogue())
    host = build_fleet_host(
        fleet, sink, interval_s=1.0, default_duration_s=300.0, clock=fixed_clock, ids=counter_ids()
    )
    for agent in host.agents.values():
        agent.settings = AgentSettings(1.0, 0.0, publish_retry_s=0.01)
    await host.register_all()
    await host.handle_order(*order("b-c-001", "t9", env={"SUANLI_SIM_DURATION_S": "0.05"}))
    sink.failures = 2  # the end is published while the bus fails twice
    await eventually(lambda: bool(sink.named("TaskFinished")))
    (finished,) = sink.named("TaskFinished")
    assert finished["task_id"] == "t9" and sink.failures == 0


def consumed(event_name: str, record: dict[str, Any]) -> ConsumedEvent:
    return ConsumedEvent("placements", 0, 0, None, event_name, record, (), Context(), 0)


async def test_orders_older_than_the_age_limit_by_the_injected_clock_are_skipped() -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    clock = ManualClock(T0)
    handler = OrderHandler(host, clock=clock, max_age_s=600.0)
    name, record = order("b-c-001", "old", env={"SUANLI_SIM_DURATION_S": "60"})
    await handler(consumed(name, {**record, "occurred_at": T0 - dt.timedelta(seconds=601)}))
    assert host.agents["b-c-001"].table.task_ids() == []
    name, record = order("b-c-001", "fresh", env={"SUANLI_SIM_DURATION_S": "60"})
    await handler(consumed(name, {**record, "occurred_at": T0 - dt.timedelta(seconds=599)}))
    assert host.agents["b-c-001"].table.task_ids() == ["fresh"]
    clock.advance(dt.timedelta(seconds=2))  # a stop of that age, read 2 s later: stale, skipped
    await handler(
        consumed(
            "TaskPreempted",
            {
                **order("b-c-001", "fresh", event_name="TaskPreempted")[1],
                "occurred_at": T0 - dt.timedelta(seconds=599),
            },
        )
    )
    assert host.agents["b-c-001"].table.task_ids() == ["fresh"]
    await host.shutdown()


@pytest.mark.parametrize("task_id", ["../../etc/cron.d/x", "/tmp/x", "a/b", ".hidden", "..", "", "x\x00y"])
def test_a_task_id_that_is_not_a_plain_name_is_refused(task_id: str) -> None:
    # The task id names the task's log file in the agent's directory: nothing may point outside it.
    _, record = order("n", "d1")
    with pytest.raises(InvalidOrder, match="task_id"):
        parse_placement(record | {"task_id": task_id})


def test_scheduler_task_ids_are_plain_names() -> None:
    _, record = order("n", "d1")
    task_id = "3f2a9c1e-6b0d-4c55-9a0e-2d1f7b8e4c3a-worker-12"
    assert parse_placement(record | {"task_id": task_id}).task_id == task_id


def replica_env(model: str = "llama-2-7b") -> dict[str, str]:
    return {
        "SUANLI_SERVICE_ID": "svc-x",
        "SUANLI_SERVICE_REPLICA": "svc-x-r1",
        "SUANLI_SERVICE_MODEL": model,
        "SUANLI_SERVICE_MAX_BATCH": "8",
    }


async def test_a_replica_task_serves_as_a_simulated_replica_and_reports_its_load() -> None:
    sink = RecordingSink()
    fleet = parse_fleet(FLEET, default_catalogue())
    host = build_fleet_host(
        fleet, sink, interval_s=1.0, default_duration_s=300.0, replica_interval_s=0.05, clock=fixed_clock
    )
    await host.register_all()
    placed = order("a-g-001", "t-r1", devices=[{"index": 0, "milli": 500}], env=replica_env())
    assert await host.handle_order(*placed)
    await eventually(lambda: len(sink.named("ReplicaLoadReported")) >= 2)
    report = sink.named("ReplicaLoadReported")[0]
    assert (report["service_id"], report["replica_id"], report["region"]) == ("svc-x", "svc-x-r1", "r1")
    assert report["address"].startswith("127.0.0.1:") and report["max_batch"] == 8
    assert report["occurred_at"] == T0 and report["kv_free_tokens"] > 0
    await host.handle_order(*order("a-g-001", "t-r1", event_name="TaskPreempted"))
    await eventually(lambda: bool(sink.named("TaskFailed")))
    assert sink.named("TaskFailed")[0]["kind"] == "KILLED"
    await host.shutdown()


@pytest.mark.parametrize(
    ("node", "devices", "model", "reason"),
    [
        ("a-g-001", [{"index": 0, "milli": 1000}], "gpt-9", "model 'gpt-9' is not simulated (llama-2-7b, "),
        ("b-c-001", [], "llama-2-7b", "a simulated replica needs a GPU share on a GPU node"),
        ("a-g-001", [{"index": 0, "milli": 500}], "llama-2-70b", "llama-2-70b needs 128.5 GiB of weights"),
    ],
)
async def test_a_replica_this_node_cannot_serve_fails_to_start_with_the_reason(
    node: str, devices: list[dict[str, int]], model: str, reason: str
) -> None:
    sink = RecordingSink()
    host = fleet_host(sink)
    await host.register_all()
    await host.handle_order(*order(node, "t-bad", devices=devices, env=replica_env(model)))
    (failed,) = sink.named("TaskFailed")
    assert failed["kind"] == "ERROR" and failed["reason"].startswith("could not start: replica svc-x-r1: ")
    assert reason in failed["reason"]
    assert sink.named("ReplicaLoadReported") == []
    await host.shutdown()
