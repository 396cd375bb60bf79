"""The service aggregate and the use cases over the in-memory adapter: replicas requested through the
scheduler's command topic, followed through its facts, replaced, released; refusals with field paths."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from suanli.clock import ManualClock
from suanli.contracts import decode
from suanli.contracts.replica_env import REPLICA_ENV
from suanli.jobspec.ids import job_id_of_request
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.domain.service import ReplicaPolicy, ReplicasOutOfRange, ReplicaState
from suanli.serving.domain.spec import ServiceSpecError
from suanli.serving.service_layer.errors import InvalidField, ServiceExists, ServiceNotFound
from suanli.serving.service_layer.serving import ServingService

SPEC: dict[str, Any] = {
    "name": "chat",
    "model": "llama-2-7b",
    "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"], "cpu": "4", "memory": "16Gi"},
    "min_replicas": 2,
    "max_replicas": 4,
    "target": {"concurrency": 8},
    "regions": ["cn-east", "cn-west"],
}
POLICY = ReplicaPolicy(guaranteed_class="serving", surge_class="batch-plus")


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


def _setup() -> tuple[InMemoryServing, ServingService]:
    clock = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))
    serial = itertools.count(1)
    store = InMemoryServing(clock, _ids())
    return store, ServingService(default_catalogue(), POLICY, lambda: f"svc-{next(serial)}")


async def _outbox(store: InMemoryServing) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.topic, *decode(r.value)) for r in await store.store.pending_outbox(10_000)]


async def _create(store: InMemoryServing, service: ServingService, **extra: Any) -> None:
    async with store.begin() as unit:
        await service.create(unit, "acme/nlp", {**SPEC, **extra}, 0, "alice@acme")


async def test_create_requests_min_replicas_spread_over_regions_as_inference_jobs() -> None:
    store, service = _setup()
    await _create(store, service)
    out = await _outbox(store)
    names = [(topic, name) for topic, name, _ in out]
    assert names == [
        ("services.events", "ServiceCreated"),
        ("services.events", "ServiceScaled"),
        ("services.events", "ReplicaRequested"),
        ("services.events", "ReplicaRequested"),
        ("jobs.commands", "JobSubmissionRequested"),
        ("jobs.commands", "JobSubmissionRequested"),
    ]
    scaled = out[1][2]
    assert (scaled["from_replicas"], scaled["to_replicas"], scaled["reason"]) == (0, 2, "created")
    commands = [r for _, n, r in out if n == "JobSubmissionRequested"]
    jobs = [json.loads(c["spec"]) for c in commands]
    assert [c["tenant"] for c in commands] == ["acme", "acme"]
    assert [j["tasks"][0]["resources"]["regions"] for j in jobs] == [["cn-east"], ["cn-west"]]
    assert all(j["kind"] == "inference" and j["queue"] == "acme/nlp" for j in jobs)
    # Guaranteed replicas: the guaranteed class, never preemptible.
    assert all((j["priority_class"], j["preemptible"]) == ("serving", False) for j in jobs)
    assert jobs[0]["tasks"][0]["env"][REPLICA_ENV] == "svc-1-r1"
    stored = await store.get("acme", "chat")
    assert stored is not None and stored.service.desired == 2 and len(stored.service.replicas) == 2


async def test_replicas_follow_the_scheduler_and_a_failed_one_is_replaced() -> None:
    store, service = _setup()
    await _create(store, service)
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "submitted")
        await service.job_submitted(unit, "serving-svc-1-r2", "job-2")  # JobSubmitted before the reply
        await service.job_answered(unit, "serving-svc-1-r2", True, "job-2", "OK", "submitted")
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "cn-east-site", 1)
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "cn-east-site", 1)  # again
    stored = await store.get("acme", "chat")
    assert stored is not None
    states = {r.replica_id: (r.state, r.job_id) for r in stored.service.replicas.values()}
    assert states == {
        "svc-1-r1": (ReplicaState.PLACED, "job-1"),
        "svc-1-r2": (ReplicaState.PENDING, "job-2"),
    }
    before = len(await _outbox(store))
    async with store.begin() as unit:
        await service.job_ended(unit, "job-1", "JobFailed", "exit code 1")
    out = (await _outbox(store))[before:]
    assert [n for _, n, _ in out] == [
        "ReplicaStopped",
        "ServiceScaled",
        "ReplicaRequested",
        "JobSubmissionRequested",
    ]
    assert out[0][2]["final"] and out[0][2]["cause"] == "failed"
    assert (out[1][2]["reason"], out[1][2]["replica_id"], out[1][2]["to_replicas"]) == (
        "replica-replaced",
        "svc-1-r1",
        2,
    )
    # The replacement keeps the count, goes where the lost one was, and is guaranteed like it.
    job = json.loads(out[3][2]["spec"])
    assert job["tasks"][0]["resources"]["regions"] == ["cn-east"] and not job["preemptible"]
    stored = await store.get("acme", "chat")
    assert stored is not None and sorted(stored.service.replicas) == ["svc-1-r2", "svc-1-r3"]


async def test_requeued_is_not_final_and_scale_up_adds_preemptible_surge_replicas() -> None:
    store, service = _setup()
    await _create(store, service)
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "s", 1)
        await service.job_requeued(unit, "job-1", 2, "node lost")
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "s", 1)  # late, void
    stored = await store.get("acme", "chat")
    assert stored is not None and stored.service.replicas["svc-1-r1"].state is ReplicaState.PENDING
    async with store.begin() as unit:
        await service.task_placed(unit, "svc-1-r1", "job-1", "n2", "cn-east", "s", 2)
    stored = await store.get("acme", "chat")
    assert stored is not None
    assert (stored.service.replicas["svc-1-r1"].state, stored.service.replicas["svc-1-r1"].node_id) == (
        ReplicaState.PLACED,
        "n2",
    )
    before = len(await _outbox(store))
    async with store.begin() as unit:
        await service.scale(unit, "acme", "chat", 3, "alice@acme")
    out = (await _outbox(store))[before:]
    assert [n for _, n, _ in out] == ["ServiceScaled", "ReplicaRequested", "JobSubmissionRequested"]
    assert (out[0][2]["reason"], out[0][2]["to_replicas"]) == ("manual", 3)
    job = json.loads(out[2][2]["spec"])
    assert (job["priority_class"], job["preemptible"]) == ("batch-plus", True)


async def test_scale_down_and_delete_cancel_jobs_even_those_named_later() -> None:
    store, service = _setup()
    await _create(store, service, min_replicas=1)
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
        await service.scale(unit, "acme", "chat", 2, "alice@acme")
    before = len(await _outbox(store))
    async with store.begin() as unit:
        await service.delete(unit, "acme", "chat", "alice@acme")
    out = (await _outbox(store))[before:]
    # r1 has its job: released and cancelled at once; r2 has none yet: cancelled once it is named.
    assert [n for _, n, _ in out] == [
        "ServiceDeleted",
        "ReplicaReleased",
        "ReplicaReleased",
        "JobCancellationRequested",
    ]
    assert out[3][2]["job_id"] == "job-1"
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r2", True, "job-2", "OK", "")
    late = (await _outbox(store))[len(out) + before :]
    assert [n for _, n, _ in late] == ["ReplicaSubmitted", "ReplicaReleased", "JobCancellationRequested"]
    assert late[2][2]["job_id"] == "job-2"
    stored = await store.get("acme", "chat")
    assert stored is not None and stored.service.replicas == {} and stored.service.state.value == "deleted"
    async with store.begin() as unit:
        with pytest.raises(ServiceNotFound):
            await service.scale(unit, "acme", "chat", 2, "")


async def test_refusals_name_the_field() -> None:
    store, service = _setup()
    async with store.begin() as unit:
        with pytest.raises(ServiceSpecError) as bad:
            await service.create(unit, "acme", {**SPEC, "min_replicas": 5, "colour": "red"}, 0, "")
    assert bad.value.problems == ("spec.colour: unknown field",)
    small = {"gpu": 0.1, "gpu_models": ["A100 80GB SXM"]}
    async with store.begin() as unit:
        with pytest.raises(ServiceSpecError) as bad:
            await service.create(unit, "acme", {**SPEC, "model": "llama-2-70b", "resources": small}, 0, "")
    assert bad.value.problems == (
        "spec.resources.gpu: llama-2-70b needs 128.5 GiB of weights; 0.1 x A100 80GB SXM leaves 7.2 GiB "
        "at 90% use",
    )
    async with store.begin() as unit:
        with pytest.raises(InvalidField, match=r"^queue: is required"):
            await service.create(unit, "", SPEC, 0, "")
    await _create(store, service)
    async with store.begin() as unit:
        with pytest.raises(ServiceExists):
            await service.create(unit, "acme", SPEC, 0, "")
    async with store.begin() as unit:
        with pytest.raises(ReplicasOutOfRange, match=r"^replicas: 9 is outside .* \(2\.\.4\)"):
            await service.scale(unit, "acme", "chat", 9, "")
    # A refusal rolls the unit back: nothing of it is stored or announced.
    assert len(await store.store.read("service-svc-2")) == 0


async def test_a_refused_submission_is_not_replaced_and_facts_of_other_jobs_change_nothing() -> None:
    store, service = _setup()
    await _create(store, service)
    before = len(await _outbox(store))
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", False, "", "INVALID_ARGUMENT", "spec.x: bad")
        await service.job_ended(unit, "job-of-someone-else", "JobFailed", "")
        await service.task_placed(unit, "svc-9-r1", "job-9", "n1", "r", "s", 1)
    out = (await _outbox(store))[before:]
    assert [n for _, n, _ in out] == ["ReplicaStopped"]
    assert out[0][2]["cause"] == "refused" and "INVALID_ARGUMENT" in out[0][2]["reason"]
    # Asking for the same count again requests the refused replica anew.
    async with store.begin() as unit:
        await service.scale(unit, "acme", "chat", 2, "alice@acme")
    again = (await _outbox(store))[before + 1 :]
    assert [n for _, n, _ in again] == ["ServiceScaled", "ReplicaRequested", "JobSubmissionRequested"]
    async with store.begin() as unit:
        await service.scale(unit, "acme", "chat", 2, "alice@acme")  # nothing missing: no change
    assert len(await _outbox(store)) == before + 4


async def test_the_example_spec_is_valid_and_its_replica_jobs_are_valid_job_specs() -> None:
    from pathlib import Path

    import yaml

    from suanli.jobspec.load import validate_document

    example = Path(__file__).resolve().parents[3] / "examples" / "services" / "chat.yaml"
    store, service = _setup()
    async with store.begin() as unit:
        await service.create(unit, "", yaml.safe_load(example.read_text()), 0, "")
    commands = [r for _, n, r in await _outbox(store) if n == "JobSubmissionRequested"]
    jobs = [validate_document(json.loads(c["spec"])) for c in commands]
    assert [(j.kind, j.queue, j.tasks[0].resources.regions) for j in jobs] == [
        ("inference", "globex", ["washington-dc"]),
        ("inference", "globex", ["frankfurt"]),
    ]
    task = jobs[0].tasks[0]
    assert (task.command, task.args[:2]) == (
        "python -m vllm.entrypoints.openai.api_server",
        ["--model", "meta-llama/Llama-2-7b-chat-hf"],
    )


async def test_a_started_replica_runs_and_a_late_placement_keeps_it_running() -> None:
    store, service = _setup()
    await _create(store, service)
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
        await service.task_started(unit, "job-1", "n1", 1)  # read before its placement
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "site-a", 1)
        await service.task_started(unit, "job-1", "n1", 1)  # redelivered
    stored = await store.get("acme", "chat")
    assert stored is not None
    replica = stored.service.replicas["svc-1-r1"]
    assert (replica.state, replica.site, stored.service.ready) == (ReplicaState.RUNNING, "site-a", 1)
    names = [n for _, n, _ in await _outbox(store)]
    assert names.count("ReplicaStarted") == 1 and names.count("ReplicaPlaced") == 1


async def test_a_replicas_job_is_known_from_its_request_so_its_start_or_end_read_first_counts() -> None:
    """Topics are read in no order relative to each other: the TaskStarted (or the end) of a replica's
    job may be read before the scheduler's answer or JobSubmitted names the job. Its id follows from
    the request (the scheduler's idempotency key), so neither is passed over as another job's."""
    store, service = _setup()
    await _create(store, service)
    first, second = (job_id_of_request("acme", f"serving-svc-1-r{i}") for i in (1, 2))
    assert await store.knows_job(first) and await store.knows_job(second)
    assert not await store.knows_job(job_id_of_request("other", "serving-svc-1-r1"))
    async with store.begin() as unit:
        await service.task_started(unit, first, "n1", 1)
        await service.job_ended(unit, second, "JobFailed", "exit code 1")
        # The answers, read last, change nothing.
        await service.job_answered(unit, "serving-svc-1-r1", True, first, "OK", "")
        await service.job_submitted(unit, "serving-svc-1-r2", second)
    stored = await store.get("acme", "chat")
    assert stored is not None
    replicas = {r.replica_id: (r.state, r.job_id) for r in stored.service.replicas.values()}
    assert replicas == {
        "svc-1-r1": (ReplicaState.RUNNING, first),
        "svc-1-r3": (ReplicaState.REQUESTED, ""),  # the failed one's replacement
    }
    names = [n for _, n, _ in await _outbox(store)]
    assert names.count("ReplicaStarted") == 1 and names.count("ReplicaStopped") == 1
    assert names.count("ReplicaSubmitted") == 0


async def test_a_newer_attempt_placed_before_its_requeue_records_the_loss_once() -> None:
    store, service = _setup()
    await _create(store, service)
    async with store.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
        await service.task_placed(unit, "svc-1-r1", "job-1", "n1", "cn-east", "s", 1)
        await service.task_placed(unit, "svc-1-r1", "job-1", "n2", "cn-east", "s", 2)
        await service.job_requeued(unit, "job-1", 2, "node n1 was lost")  # read late: already known
    stopped = [r for _, n, r in await _outbox(store) if n == "ReplicaStopped"]
    assert [(r["cause"], r["final"], r["attempt"]) for r in stopped] == [("requeued", False, 2)]
    stored = await store.get("acme", "chat")
    assert stored is not None
    replica = stored.service.replicas["svc-1-r1"]
    assert (replica.state, replica.node_id, replica.attempt) == (ReplicaState.PLACED, "n2", 2)


async def test_scale_down_releases_surge_replicas_unplaced_first_then_the_newest() -> None:
    store, service = _setup()
    async with store.begin() as unit:
        await service.create(unit, "acme", {**SPEC, "min_replicas": 1}, 4, "")
        for seq in (1, 2, 3, 4):
            await service.job_answered(unit, f"serving-svc-1-r{seq}", True, f"job-{seq}", "OK", "")
        for seq in (1, 2, 4):
            await service.task_placed(unit, f"svc-1-r{seq}", f"job-{seq}", "n1", "cn-east", "s", 1)
    before = len(await _outbox(store))
    async with store.begin() as unit:
        await service.scale(unit, "acme", "chat", 2, "")
    released = [r["replica_id"] for _, n, r in (await _outbox(store))[before:] if n == "ReplicaReleased"]
    assert released == ["svc-1-r3", "svc-1-r4"]  # r3 not placed yet, then the newest surge replica
    stored = await store.get("acme", "chat")
    assert stored is not None and sorted(stored.service.replicas) == ["svc-1-r1", "svc-1-r2"]
    assert stored.service.replicas["svc-1-r1"].guaranteed
