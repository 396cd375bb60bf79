"""End to end, on one platform for the module: gRPC submissions are placed, run on a simulated fleet of 20
nodes in 3 regions and on a real-mode agent running real processes, and reach their final states;
garbage on every input topic is dead-lettered while the services keep serving; bad RPCs are refused;
every running service's /metrics (serving's with one inference service created) serves every catalogued
metric with its labels, and a real Prometheus scraping the platform answers every dashboard panel and
template variable with data.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import secrets
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.api.serving.v1 import serving_pb2_grpc as spb_grpc
from suanli.bus import headers as h
from suanli.bus import topic_name, topics
from suanli.bus.publisher import EventPublisher
from suanli.cli.config import aio_bearer_channel
from suanli.infra.testing import outside_pytest_root
from suanli.platform.stack import Stack
from suanli.platform.supervisor import ServiceSpec, suanli_argv
from suanli.telemetry import METRICS, METRICS_PORTS, MetricSpec

from . import prometheus
from .kit import (
    Platform,
    Served,
    TopicReader,
    gpu_task,
    job_spec,
    over_allocations,
    read_topics,
    scrape,
    stack_config,
    until,
)

REAL_NODE = "e2e-real-1"
REAL_REGION = "cn-lab"
# A model of the device catalogue that the e2e fleet lacks and its queue has no quota for: such a job is
# accepted and waits (INADMISSIBLE), where a name outside the catalogue would be refused at submit.
ABSENT_MODEL = "P100"
# One inference service on the simulated fleet, so serving's metrics (replicas by model and state,
# scale decisions) have a model to report: one replica on half an L40S.
SERVICE_SPEC = """
name: e2e-chat
model: llama-2-7b
resources: {gpu: 0.5, gpu_models: [L40S], cpu: "2", memory: 8Gi}
target: {concurrency: 8}
"""


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Kept after the run (service logs for a failure); outside pytest's root, see outside_pytest_root.
    home = outside_pytest_root("suanli-e2e-jobs-")
    with Stack(stack_config(home)) as started:
        # A real-mode agent beside the simulated fleet: its own region, so jobs can be steered to it.
        started.supervisor.start(
            ServiceSpec(
                "agent-real",
                suanli_argv(
                    "agent",
                    "--node-id",
                    REAL_NODE,
                    "--region",
                    REAL_REGION,
                    "--site",
                    "lab1",
                    "--interval",
                    "1",
                    "--grace",
                    "2",
                    "--task-log-dir",
                    str(home / "tasks"),
                ),
            )
        )
        # The request gateway, as `suanli up` runs it: its request metrics and the dashboard's gateway row.
        started.start_gateway("frankfurt")
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    p = Platform(stack, stack.scheduler_addr)
    # 20 simulated nodes + the real one, all READY in the scheduler's own view.
    await p.ready_nodes(21, timeout=90)
    async with aio_bearer_channel(stack.serving_addr, stack.admin_token, stack.ca) as channel:
        await spb_grpc.ServingStub(channel).CreateService(
            spb.CreateServiceRequest(queue="e2e", spec=SERVICE_SPEC), timeout=10
        )
    yield p
    await p.close()


async def watch_states(platform: Platform, job_id: str) -> list[str]:
    """Every state WatchJob streams until the job is final, consecutive repeats folded."""
    states: list[str] = []
    stream = platform.api().WatchJob(pb.WatchJobRequest(job_id=job_id))
    async for event in stream:
        state = pb.JobState.Name(event.state)
        if not states or states[-1] != state:
            states.append(state)
    return states


async def test_gang_and_fractional_jobs_run_and_no_device_is_over_allocated(platform: Platform) -> None:
    token = secrets.token_hex(3)
    gang = await platform.submit(
        job_spec("gang", gpu_task("worker", replicas=4, duration_s=3.0)), f"gang-{token}"
    )
    # Watch from the start, so the stream sees every change of the gang job.
    watching = asyncio.create_task(watch_states(platform, gang.id))
    shares = [
        await platform.submit(
            job_spec(f"share-{i}", gpu_task("infer", gpu_milli=300, duration_s=2.0)), f"share-{token}-{i}"
        )
        for i in range(3)
    ]
    jobs = [gang, *shares]
    final = await platform.wait_final([j.id for j in jobs], timeout=60)
    assert {pb.JobState.Name(j.state) for j in final.values()} == {"JOB_STATE_SUCCEEDED"}
    assert await asyncio.wait_for(watching, 10) == [
        "JOB_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_SUCCEEDED",
    ]

    gang_tasks = final[gang.id].tasks
    assert len(gang_tasks) == 4 and all(t.state == "SUCCEEDED" and t.attempt == 1 for t in gang_tasks)
    assert all(len(t.gpu_indices) == 1 and list(t.gpu_milli) == [1000] for t in gang_tasks)
    for job in shares:
        (task,) = final[job.id].tasks
        assert task.state == "SUCCEEDED" and list(task.gpu_milli) == [300]

    # The whole placements topic against the ends the agents reported: no device past 1000 milli.
    task_ids = {t.task_id for j in final.values() for t in j.tasks}
    placements_t = topic_name(topics.PLACEMENTS.name)
    lifecycle_t = topic_name(topics.TASKS_LIFECYCLE.name)

    def complete(records: list) -> bool:
        placed = {c.record["task_id"] for c in records if c.name == "TaskPlaced"}
        ended = {c.record["task_id"] for c in records if c.name == "TaskFinished"}
        return task_ids <= placed and task_ids <= ended

    records = await read_topics(platform.bootstrap, [placements_t, lifecycle_t], complete)
    placements = [c for c in records if c.topic == placements_t]
    lifecycle = [c for c in records if c.topic == lifecycle_t]
    assert over_allocations(placements, lifecycle) == []
    ours = [c.record for c in placements if c.name == "TaskPlaced" and c.record["task_id"] in task_ids]
    assert sorted(r["task_id"] for r in ours) == sorted(task_ids)  # each placed exactly once
    assert all(r["duration_s"] is not None for r in ours)


def real_job(name: str, code: int) -> pb.JobSpec:
    return pb.JobSpec(
        name=name,
        queue="e2e",
        priority_class="batch",
        max_retries=0,
        tasks=[
            pb.TaskSpec(
                name="main",
                command=sys.executable,
                args=["-c", f"import os, sys; print(os.environ['SUANLI_NODE_ID']); sys.exit({code})"],
                resources=pb.ResourceRequest(cpu_milli=100, memory_mib=64, regions=[REAL_REGION]),
            )
        ],
    )


async def test_real_agent_runs_the_process_and_its_exit_code_reaches_the_job(platform: Platform) -> None:
    token = secrets.token_hex(3)
    failing = await platform.submit(real_job("exits-3", 3), f"real-3-{token}")
    passing = await platform.submit(real_job("exits-0", 0), f"real-0-{token}")
    final = await platform.wait_final([failing.id, passing.id], timeout=60)

    failed = final[failing.id]
    assert pb.JobState.Name(failed.state) == "JOB_STATE_FAILED"
    (task,) = failed.tasks
    assert (task.state, task.exit_code, task.node_id) == ("FAILED", 3, REAL_NODE)
    # Its history, from the job's record: placed and started on the agent's node, ended with exit code 3.
    described = await platform.api().DescribeJob(pb.DescribeJobRequest(job_id=failing.id), timeout=10)
    types = [e.type for e in described.events]
    assert types[:3] == ["JobSubmitted", "TaskPlaced", "TaskStarted"] and types[-1] == "JobFailed", types
    assert [e.exit_code for e in described.events if e.HasField("exit_code")] == [3]
    (attempt,) = described.attempts
    assert (attempt.node_id, attempt.outcome, attempt.exit_code) == (REAL_NODE, "FAILED", 3)
    assert attempt.HasField("started_at") and attempt.HasField("ended_at")

    succeeded = final[passing.id]
    assert pb.JobState.Name(succeeded.state) == "JOB_STATE_SUCCEEDED"
    (task,) = succeeded.tasks
    assert (task.state, task.exit_code, task.node_id) == ("SUCCEEDED", 0, REAL_NODE)
    # It really ran as a process on this machine: its output is in the agent's task log.
    log = Path(platform.home / "tasks" / f"{task.task_id}.{task.attempt}.log")
    assert log.read_text().strip() == REAL_NODE


# The input topic of every consumer, and the service that reads it.
GARBAGE_TOPICS = (
    topics.NODE_SNAPSHOTS,  # metering, scheduler view
    topics.TASKS_LIFECYCLE,  # metering, scheduler
    topics.PLACEMENTS,  # agents, metering
    topics.CAPACITY_NODES,  # scheduler view
    topics.NODES_STATUS,  # scheduler view
    topics.USAGE_METERED,  # billing
    topics.USAGE_SAMPLES,  # metering
)


async def test_garbage_on_every_input_topic_is_dead_lettered_and_services_keep_serving(
    platform: Platform,
) -> None:
    token = secrets.token_hex(4).encode()
    garbage = {spec.name: b"\x00not avro " + spec.name.encode() + b" " + token for spec in GARBAGE_TOPICS}
    async with EventPublisher(platform.bootstrap) as bus:
        for name, value in garbage.items():
            await bus.publish_raw(topic_name(name), b"garbage", value, [])

    dlqs = [f"{topic_name(name)}.dlq" for name in garbage]
    async with TopicReader(platform.bootstrap, *dlqs) as reader:

        async def all_dead_lettered() -> bool:
            seen = {
                c.headers.get(h.DLQ_ORIGINAL_TOPIC, b"").decode()
                for c in await reader.poll()
                if c.value in garbage.values()
            }
            return seen >= set(garbage)

        await until(all_dead_lettered, 60, "garbage on every input topic in its DLQ", every=0.1)
        for c in reader.records:
            if c.value not in garbage.values():
                continue
            original = c.headers[h.DLQ_ORIGINAL_TOPIC].decode()
            assert c.topic == f"{original}.dlq" and c.value == garbage[original]
            assert c.headers[h.DLQ_ERROR_CLASS] and c.headers[h.DLQ_ERROR_MESSAGE]

    # Every service is still up and the platform still runs work end to end.
    assert platform.stack.supervisor.failed() == []
    job = await platform.submit(
        job_spec("after-garbage", gpu_task("w", duration_s=1.0)), f"after-garbage-{token.decode()}"
    )
    final = await platform.wait_final([job.id], timeout=60)
    assert pb.JobState.Name(final[job.id].state) == "JOB_STATE_SUCCEEDED"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda api: api.SubmitJob(pb.SubmitJobRequest(request_id="no-spec")), "spec"),
        (
            lambda api: api.SubmitJob(
                pb.SubmitJobRequest(
                    spec=job_spec("bad", gpu_task("w", gpu_milli=1500)), request_id="bad-milli"
                )
            ),
            "spec.tasks[0].resources.gpu_milli",
        ),
        (
            lambda api: api.SubmitJob(
                pb.SubmitJobRequest(spec=pb.JobSpec(name="q", queue="nowhere", tasks=[gpu_task("w")]))
            ),
            "spec.queue",
        ),
        (lambda api: api.GetJob(pb.GetJobRequest()), "job_id"),
        (lambda api: api.ListJobs(pb.ListJobsRequest(page_size=-1)), "page_size"),
    ],
)
async def test_invalid_rpcs_get_invalid_argument_naming_the_field(
    platform: Platform, call: object, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(platform.api())  # type: ignore[operator]
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (raised.value.details() or "").startswith(f"{field}:")


# The stack's processes by the service they run (the simulated fleet is the sensing agent).
SCRAPED = {
    "scheduling": "scheduling",
    "billing": "billing",
    "metering": "metering",
    "routing": "routing",
    "serving": "serving",
    "gateway": "gateway",
}
SCRAPED_AGENT = ("fleet", "sensing")
SAMPLE_SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def _missing(spec: MetricSpec, served: dict[str, Served]) -> list[str]:
    """What of ``spec`` is not served: each exporter it names must serve every sample name with exactly
    the catalogued labels; a bus metric ("every consumer") must be served whole by some service."""
    names = [spec.name + suffix for suffix in SAMPLE_SUFFIXES[spec.kind]]
    labels = frozenset(spec.labels)

    def lacks(service: str) -> list[str]:
        return [f"{service}: {n}{sorted(labels)}" for n in names if labels not in served[service].get(n, ())]

    exporters = [service for service in METRICS_PORTS if service in spec.exporter]
    if exporters:
        return [problem for service in exporters for problem in lacks(service)]
    return [] if any(not lacks(service) for service in served) else lacks(next(iter(served)))


async def test_every_catalogued_metric_is_served_with_its_labels(platform: Platform) -> None:
    stack = platform.stack
    token = secrets.token_hex(4)
    # What makes the event-driven series appear: a job placed (decisions, placement latency), one that
    # cannot be (pending by reason), one Resolve (routing's counters), one garbage order (a dead letter).
    await platform.submit(job_spec("metrics-runs", gpu_task("w", duration_s=1.0)), f"metrics-runs-{token}")
    waiting = await platform.submit(
        job_spec("metrics-waits", gpu_task("w", gpu_models=[ABSENT_MODEL])), f"metrics-waits-{token}"
    )
    async with aio_bearer_channel(stack.routing_addr, stack.admin_token, stack.ca) as channel:
        await rpb_grpc.RoutingStub(channel).Resolve(rpb.ResolveRequest(from_region="frankfurt"), timeout=10)
    await asyncio.to_thread(_generate, stack)
    async with EventPublisher(platform.bootstrap) as bus:
        await bus.publish_raw(
            topic_name(topics.PLACEMENTS.name), b"garbage", b"\x00metrics " + token.encode(), []
        )

    urls = {service: stack.metrics_url(name) for name, service in (*SCRAPED.items(), SCRAPED_AGENT)}
    served: dict[str, Served] = {}

    async def all_served() -> bool:
        served.update({s: await asyncio.to_thread(scrape, url) for s, url in urls.items()})
        return not any(_missing(spec, served) for spec in METRICS)

    try:
        await until(all_served, 60, "every catalogued metric served", every=1.0)
    except AssertionError:
        pass  # the assertion below names what is missing
    finally:
        await platform.api().CancelJob(pb.CancelJobRequest(job_id=waiting.id, reason="metrics test done"))
    assert [problem for spec in METRICS for problem in _missing(spec, served)] == []


def _generate(stack: Stack) -> int:
    """One generate request through the gateway (no replica reports load here: a 404 or 503, counted)."""
    request = urllib.request.Request(
        f"{stack.gateway_url}/v1/services/e2e-none/generate", data=b'{"max_tokens": 8}', method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def _idle_histogram(prom: prometheus.Prometheus, query: str) -> bool:
    """Whether the histogram of quantile ``query`` observed nothing in the rate window: its quantile is
    NaN by definition (routing's view freshness, say, between two probe rounds)."""
    histogram = re.search(r"\b(suanli_\w+)_bucket\b", query)
    if histogram is None:
        return False
    name = f"{histogram.group(1)}_count"
    rows = await asyncio.to_thread(prom.query, f"sum(increase({name}[{prometheus.RATE_INTERVAL}]))")
    return all(float(row["value"][1]) == 0 for row in rows)


async def _traffic(platform: Platform, stop: asyncio.Event) -> None:
    """Jobs placed and Resolves answered once a second, so rate and latency panels have something new."""
    n = 0
    stack = platform.stack
    async with aio_bearer_channel(stack.routing_addr, stack.admin_token, stack.ca) as channel:
        routing = rpb_grpc.RoutingStub(channel)
        while not stop.is_set():
            n += 1
            token = f"{secrets.token_hex(3)}-{n}"
            await platform.submit(job_spec(f"panel-{n}", gpu_task("w", duration_s=0.5)), f"panel-{token}")
            # Both workload kinds: the inference dashboard reads the inference Resolves.
            for kind in (rpb.WORKLOAD_KIND_TRAINING, rpb.WORKLOAD_KIND_INFERENCE):
                await routing.Resolve(rpb.ResolveRequest(kind=kind, from_region="frankfurt"), timeout=10)
            await asyncio.to_thread(_generate, stack)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def test_prometheus_answers_every_dashboard_panel_and_variable(platform: Platform) -> None:
    executable = prometheus.binary()
    if executable is None:
        pytest.skip("Debian's prometheus package is not installed (`make prometheus` installs it)")
    # Besides the traffic: a job that waits (pending by reason) and a garbage order (a dead letter).
    token = secrets.token_hex(4)
    waiting = await platform.submit(
        job_spec("panels-wait", gpu_task("w", gpu_models=[ABSENT_MODEL])), f"panels-wait-{token}"
    )
    async with EventPublisher(platform.bootstrap) as bus:
        await bus.publish_raw(
            topic_name(topics.PLACEMENTS.name), b"garbage", b"\x00panels " + token.encode(), []
        )
    stop = asyncio.Event()
    with prometheus.start(executable, platform.stack, platform.home / "prometheus") as prom:
        traffic = asyncio.create_task(_traffic(platform, stop))
        try:
            problems = await _unanswered(platform, prom)
        finally:
            stop.set()
            await traffic
            await platform.api().CancelJob(pb.CancelJobRequest(job_id=waiting.id, reason="panels test done"))
    assert problems == [], "\n".join(problems)


async def _unanswered(platform: Platform, prom: prometheus.Prometheus) -> list[str]:
    """Every panel query and template variable of every dashboard that Prometheus answers without data.

    Each dashboard's variables are resolved in order as Grafana does (a chained one with the variables
    before it set to every value they found), then each panel query is evaluated twice: with every
    variable on "All" (``.*``) and with every variable set to all its values (the alternation Grafana
    sends for a multi-value selection), which also catches a panel that filters on a label whose values
    are not the variable's. Every dashboard is evaluated, inference included: it is built from routing's
    inference Resolves and the capacity metrics, which exist (docs/operations.md, "Dashboards").
    """
    await until(lambda: asyncio.to_thread(prom.ready), 30, "Prometheus ready", every=0.5)
    targets = len(platform.stack.metrics_ports)

    async def scraped_long_enough() -> bool:
        # Every target up for the whole rate window (10 s at one scrape a second).
        rows = await asyncio.to_thread(prom.query, "count_over_time(up[10s]) >= 10 and up == 1")
        return len(rows) == targets

    await until(scraped_long_enough, 60, "every service scraped for 10 s", every=1.0)
    problems = []
    for dashboard in prometheus.dashboards():
        values: dict[str, list[str]] = {}
        for variable in dashboard.variables:
            chained = {name: prometheus.regex_of(found) for name, found in values.items()}
            match = prometheus.grafana_expr(variable.match, chained)
            values[variable.name] = await asyncio.to_thread(prom.label_values, variable.label, match)
            if not values[variable.name]:
                problems.append(
                    f"{dashboard.name} / ${variable.name}: no values of {variable.label} on {match}"
                )
        settings = {"All": {name: prometheus.ALL for name in values}}
        if values and all(values.values()):
            settings["every value"] = {name: prometheus.regex_of(found) for name, found in values.items()}
        for title, expr in dashboard.queries:
            for setting, variables in settings.items():
                if setting != "All" and not prometheus.references(expr):
                    continue  # the same query as on "All"
                query = prometheus.grafana_expr(expr, variables)
                problem = await _no_data(prom, query)
                if problem:
                    problems.append(f"{dashboard.name} / {title} ({setting}): {problem}")
    return problems


async def _no_data(prom: prometheus.Prometheus, query: str) -> str | None:
    """What is wrong with ``query``'s answer (no series, a non-finite value), or None when it has data."""
    rows = await asyncio.to_thread(prom.query, query)
    values = [float(row["value"][1]) for row in rows]
    finite = [v for v in values if math.isfinite(v)]
    if not values:
        return f"no data for {query}"
    if "histogram_quantile" in query:
        # A series of a quantile is NaN when its group observed nothing in the window; all of them only
        # when the whole histogram did.
        if not finite and not await _idle_histogram(prom, query):
            return f"{values} for {query}"
    elif len(finite) < len(values):
        return f"{values} for {query}"
    return None
