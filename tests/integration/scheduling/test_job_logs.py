"""`suanli job logs` on the real broker and PostgreSQL, with authentication on: a real agent runs a real
subprocess placed by the scheduler and serves its log; the scheduler streams it to the job's tenant (the
client library's `logs`, following while it runs, then read again) in one trace from the scheduler's
span to the agent's, refuses another tenant (NOT_FOUND, also at the agent itself), names a bad task or
attempt precisely, and says a simulated node has no logs."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from typer.testing import CliRunner

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.api.sensing.v1 import agent_logs_pb2 as apb
from suanli.api.sensing.v1 import agent_logs_pb2_grpc as apb_grpc
from suanli.auth.ledger import TokenLedger
from suanli.auth.principal import Role
from suanli.auth.tokens import KeyPaths, create_keys, load_private_key
from suanli.bus import ConsumerSettings
from suanli.cli.main import app as cli_app
from suanli.client import SchedulerClient
from suanli.clock import SystemClock
from suanli.contracts import default_registry, sample_records
from suanli.contracts import labels as node_labels
from suanli.eventstore import PostgresEventStore
from suanli.infra.testing import recorded_spans
from suanli.sensing.adapters.task_logs import TaskLogs
from suanli.sensing.bootstrap import RealAgentConfig, build_real_agent
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.entrypoints.logs_server import LogsEndpoint
from suanli.sensing.entrypoints.runtime import RunSettings, serve
from suanli.sensing.entrypoints.settings import SensingSettings
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.ports import EventSink

from .helpers import capacity, config, envelope, publish, started, until

pytestmark = pytest.mark.timeout(150)

QUEUES = """
queues:
  - {name: acme, quotas: {cpu: 64000}}
  - {name: globex, quotas: {cpu: 64000}}
"""
NODE = "real-logs"
FAST = ConsumerSettings(
    fetch_max_wait_ms=100, poll_timeout_ms=100, session_timeout_ms=6_000, heartbeat_interval_ms=300
)
# Prints, pauses (so a follower sees output while the attempt runs), prints again and exits 0.
PROGRAM = "import sys, time\nfor i in range(3): print('line', i, flush=True)\ntime.sleep(1.5)\nprint('bye')"
OUTPUT = b"line 0\nline 1\nline 2\nbye\n"


def _job(queue: str, name: str) -> pb.JobSpec:
    task = pb.TaskSpec(
        name="main",
        command=sys.executable,
        args=["-c", PROGRAM],
        resources=pb.ResourceRequest(cpu_milli=500, memory_mib=256),
    )
    return pb.JobSpec(name=name, queue=queue, tasks=[task])


@contextlib.asynccontextmanager
async def _agent(endpoint: LogsEndpoint, kafka: str, prefix: str, log_dir: Path) -> AsyncIterator[None]:
    async with endpoint.serving() as address:
        identity = NodeIdentity(NODE, "cn-east", "z1", "cn-east-site")
        cfg = RealAgentConfig(identity, 0.5, 2.0, log_dir=log_dir, logs_endpoint=address)

        def build(sink: EventSink) -> AgentHost:
            host = build_real_agent(cfg, sink).host
            endpoint.bind(host.agents[NODE])
            return host

        run = RunSettings(
            kafka, f"{prefix}-agent", prefix, interval_s=0.5, probe_interval_s=60, consumer=FAST
        )
        stop = asyncio.Event()
        task = asyncio.create_task(serve(run, build, stop))
        try:
            yield
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)


async def _code(call: AsyncIterator[object]) -> tuple[grpc.StatusCode, str]:
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


async def test_a_tenant_streams_its_real_tasks_log_and_nobody_else_can(
    pg_dsn: str,
    kafka_bootstrap: str,
    topic_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = KeyPaths(tmp_path / "auth")
    create_keys(keys)
    auth = {"auth_public_key": keys.public, "auth_dsn": pg_dsn, "auth_schema": f"auth_{secrets.token_hex(4)}"}
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, queues_yaml=QUEUES, **auth)
    agent_settings = SensingSettings.load({}, **auth)
    log_dir = tmp_path / "logs"
    endpoint = LogsEndpoint(TaskLogs(log_dir, NODE), "127.0.0.1:0", agent_settings)

    async with contextlib.AsyncExitStack() as stack:
        # Spans of every server in this process: the scheduler's call to the agent continues its trace.
        spans = stack.enter_context(recorded_spans("scheduling", monkeypatch))
        store = await stack.enter_async_context(
            await PostgresEventStore.connect(pg_dsn, schema=auth["auth_schema"])
        )
        ledger = TokenLedger(store, SystemClock())

        async def token(tenant: str, role: Role = Role.TENANT_MEMBER) -> str:
            key = load_private_key(keys.private)
            return (await ledger.issue(key, f"{tenant}-user", tenant, frozenset({role}), 3600, "test"))[1]

        acme, globex, admin = await token("acme"), await token("globex"), await token("", Role.PLATFORM_ADMIN)
        app = await started(cfg)
        stack.push_async_callback(app.stop)
        address = f"127.0.0.1:{app.port}"
        client = await stack.enter_async_context(SchedulerClient(address, token=acme))
        others = await stack.enter_async_context(SchedulerClient(address, token=globex))
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", NODE, "NodeCapacityChanged", capacity(NODE, 0)
        )
        await stack.enter_async_context(_agent(endpoint, kafka_bootstrap, topic_prefix, log_dir))

        md = (("authorization", f"Bearer {admin}"),)
        channel = grpc.aio.insecure_channel(address)
        stack.push_async_callback(channel.close)
        api = pb_grpc.SchedulerStub(channel)

        async def labelled() -> bool:
            nodes = (await api.ListNodes(pb.ListNodesRequest(), metadata=md)).nodes
            return any(node_labels.LOGS_ENDPOINT in n.labels for n in nodes if n.id == NODE)

        await until(labelled, what="the node's logs endpoint in the scheduler's view")

        # Followed from submission: waits for the attempt to start, streams it until it ends.
        job = await client.submit(_job("acme", "printer"))
        followed = [c async for c in client.logs(job.id, follow=True)]
        assert b"".join(c.data for c in followed) == OUTPUT
        assert {(c.task_id, c.attempt, c.node_id) for c in followed} == {(job.tasks[0].task_id, 1, NODE)}
        ended = {s.name: s for s in spans.get_finished_spans() if s.kind is trace.SpanKind.SERVER}
        proxied = ended["suanli.scheduler.v1.Scheduler/StreamJobLogs"]
        served = ended["suanli.sensing.v1.AgentLogs/StreamTaskLog"]
        assert served.context.trace_id == proxied.context.trace_id
        assert served.parent is not None and served.parent.span_id == proxied.context.span_id

        async def succeeded() -> bool:
            return (await client.get(job.id)).state == pb.JOB_STATE_SUCCEEDED

        await until(succeeded, what="the job succeeded")
        again = [c async for c in client.logs(job.id, task="main", attempt=1)]
        assert b"".join(c.data for c in again) == OUTPUT
        # The CLI, naming the job by its name, prints the same bytes (what `> file` saves).
        runner = CliRunner(env={"SUANLI_CONFIG": str(tmp_path / "no-config.yaml")})
        args = ["--token", acme, "job", "logs", "printer", "--scheduler", address]
        shown = await asyncio.to_thread(runner.invoke, cli_app, args)
        assert shown.exit_code == 0, shown.output
        assert shown.stdout_bytes == OUTPUT

        # Another tenant: the job does not exist for it, at the scheduler and at the agent alike.
        code, details = await _code(others.logs(job.id))
        assert (code, details) == (grpc.StatusCode.NOT_FOUND, f"job {job.id!r} not found")
        agent_channel = grpc.aio.insecure_channel(endpoint.address)
        stack.push_async_callback(agent_channel.close)
        agent = apb_grpc.AgentLogsStub(agent_channel)
        request = apb.StreamTaskLogRequest(task_id=job.tasks[0].task_id, attempt=1)
        code, details = await _code(
            agent.StreamTaskLog(request, metadata=(("authorization", f"Bearer {globex}"),))
        )
        assert code is grpc.StatusCode.NOT_FOUND
        assert details == f"node {NODE} keeps no log of task {job.tasks[0].task_id} attempt 1"
        direct = agent.StreamTaskLog(request, metadata=(("authorization", f"Bearer {acme}"),))
        assert b"".join([c.data async for c in direct]) == OUTPUT

        # A bad task or attempt: named precisely.
        assert await _code(client.logs(job.id, task="nope")) == (
            grpc.StatusCode.NOT_FOUND,
            f"job {job.id} has no task 'nope' (tasks: main)",
        )
        assert await _code(client.logs(job.id, attempt=4)) == (
            grpc.StatusCode.NOT_FOUND,
            "task main has no attempt 4: the job is at attempt 1",
        )

        # A simulated node: its tasks run no process, so there is no log to stream.
        sim = "sim-1"
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", sim, "NodeCapacityChanged", capacity(sim, 0)
        )
        snapshot = {
            **sample_records(default_registry().current("NodeSnapshot"))[0],
            **envelope(sim),
            "node_id": sim,
            "region": "cn-east",
            "zone": "z1",
            "labels": {node_labels.AGENT_MODE: "simulated"},
            "task_ids": [],
        }
        await publish(kafka_bootstrap, topic_prefix, "node.snapshots", sim, "NodeSnapshot", snapshot)
        spec = _job("acme", "on-sim")
        spec.tasks[0].resources.node_selector[node_labels.AGENT_MODE] = "simulated"
        on_sim = await client.submit(spec)

        async def placed() -> pb.Job | None:
            found = await client.get(on_sim.id)
            return found if found.tasks[0].node_id == sim else None

        task = (await until(placed, what="placed on the simulated node")).tasks[0]
        record = {
            **envelope(task.task_id),
            "task_id": task.task_id,
            "job_id": on_sim.id,
            "node_id": sim,
            "attempt": 1,
            "device_indices": [],
            "pid": 1,
        }
        await publish(kafka_bootstrap, topic_prefix, "tasks.lifecycle", task.task_id, "TaskStarted", record)

        async def running() -> bool:
            return (await client.get(on_sim.id)).state == pb.JOB_STATE_RUNNING

        await until(running, what="the simulated task running")
        assert await _code(client.logs(on_sim.id)) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            f"node {sim} is simulated: its tasks write no logs",
        )
        # Not started yet, without follow: there is nothing to read yet.
        nowhere = _job("acme", "later")
        nowhere.tasks[0].resources.node_selector["pool"] = "none-such"
        queued = await client.submit(nowhere)
        code, details = await _code(client.logs(queued.id))
        assert code is grpc.StatusCode.FAILED_PRECONDITION
        assert details == "task main attempt 1 is not placed yet: no output yet (follow to wait for it)"
