"""Queue administration: the pure rules, and the commands over the real writer on the in-memory store
(seeding, legacy stores, live jobs, idempotency, the cycle seeing a change at once)."""

from __future__ import annotations

import uuid

import pytest
from _scheduler import harness

from suanli.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.domain.queueing.admin import (
    LiveJobs,
    check_create,
    check_delete,
    check_update,
    creation_order,
    with_class,
)
from suanli.scheduling.service_layer.commands import (
    CancelJob,
    CreateQueue,
    DefinePriorityClass,
    DeleteQueue,
    SeedQueues,
    SubmitJob,
    UpdateQueue,
)
from suanli.scheduling.service_layer.errors import Conflict
from suanli.scheduling.service_layer.ports import Append, Outgoing
from suanli.scheduling.service_layer.queues_config import QueueConfig, parse_queue_config

GPU = "gpu:A100"


def _q(name: str, guaranteed: int = 1000, cohort: str | None = None) -> QueueSpec:
    return QueueSpec(name, (ResourceQuota(GPU, guaranteed),), cohort)


QUEUES = {q.name: q for q in (_q("acme"), _q("acme/a"))}


def _spec(queue: str, priority_class: str = "") -> AcceptedSpec:
    task = AcceptedTask("", "w", cpu_milli=1000, gpu_count=1, gpu_milli=1000, argv=("run",))
    return AcceptedSpec(name="j", queue=queue, tasks=(task,), priority_class=priority_class)


# -- the pure rules ------------------------------------------------------------------------------------


def test_create_needs_a_free_name_and_an_existing_parent() -> None:
    check_create(QUEUES, _q("acme/b"))
    with pytest.raises(AlreadyExists, match="queue 'acme/a' already exists"):
        check_create(QUEUES, _q("acme/a"))
    with pytest.raises(InvalidArgument, match=r"^queue.name: parent queue 'globex' does not exist"):
        check_create(QUEUES, _q("globex/a"))


def test_update_of_an_equal_spec_records_nothing_and_a_missing_queue_is_not_found() -> None:
    assert check_update(QUEUES, _q("acme/a")) is False
    assert check_update(QUEUES, _q("acme/a", 2000, "pool")) is True
    with pytest.raises(NotFound):
        check_update(QUEUES, _q("acme/zzz"))


def test_delete_only_a_leaf_without_live_jobs() -> None:
    check_delete(QUEUES, "acme/a", LiveJobs())
    with pytest.raises(FailedPrecondition, match="child queue"):
        check_delete(QUEUES, "acme", LiveJobs())
    with pytest.raises(FailedPrecondition, match="1 pending and 2 running"):
        check_delete(QUEUES, "acme/a", LiveJobs(1, 2))


def test_parents_are_created_first_and_a_redefined_class_keeps_its_place() -> None:
    order = creation_order((_q("acme/a/x"), _q("acme/a"), _q("globex"), _q("acme")))
    assert [q.name for q in order] == ["globex", "acme", "acme/a", "acme/a/x"]
    classes = (PriorityClass("high", 10), PriorityClass("low", 0))
    assert with_class(classes, PriorityClass("high", 20)) == (
        PriorityClass("high", 20),
        PriorityClass("low", 0),
    )


# -- the commands ---------------------------------------------------------------------------------------


async def test_the_file_seeds_an_empty_store_once() -> None:
    h = harness()
    config = parse_queue_config("priority_classes: {high: 10}\nqueues: [{name: acme/a}, {name: acme}]\n")
    assert await h.scheduler.commands.handle(SeedQueues(config)) == 3
    assert [(n, r["name"]) for n, r in await h.recorded()] == [
        ("QueueCreated", "acme"),
        ("QueueCreated", "acme/a"),
        ("PriorityClassDefined", "high"),
    ]
    changed = QueueConfig((_q("initech"),), ())
    assert await h.scheduler.commands.handle(SeedQueues(changed)) == 0
    assert set(h.projection.queues) == {"acme", "acme/a"}
    assert h.projection.priority_classes == (PriorityClass("high", 10),)


async def test_a_store_written_before_administration_keeps_its_queues() -> None:
    h = harness()
    legacy = {"name": "acme", "cohort": None, "stopped": False, "quotas": []}
    record = {"event_id": "e", "occurred_at": "t", "producer": "p", "subject_id": "acme", **legacy}
    await h.writer.commit([Append("queue-acme", 0, [Outgoing("QueueConfigured", record, uuid.uuid4())])])
    await h.scheduler.write_lock.refresh()
    assert h.projection.queues == {"acme": QueueSpec("acme")}
    assert await h.scheduler.commands.handle(SeedQueues(QueueConfig((_q("globex"),)))) == 0


async def test_a_queue_with_a_live_job_stays_and_a_new_one_admits_at_once() -> None:
    h = harness()
    await h.configure()
    commands = h.scheduler.commands
    await commands.handle(CreateQueue(_q("acme/a")))
    job = await commands.handle(SubmitJob(_spec("acme/a")))
    with pytest.raises(FailedPrecondition, match="queue 'acme/a' has 1 pending and 0 running job"):
        await commands.handle(DeleteQueue("acme/a"))
    await commands.handle(CancelJob(job.id))
    assert await commands.handle(DeleteQueue("acme/a")) == "acme/a"
    assert "acme/a" not in h.projection.queues
    names = [n for n, _ in await h.recorded() if n.startswith("Queue")]
    assert names == ["QueueCreated", "QueueCreated", "QueueDeleted"]


async def test_retries_answer_the_first_outcome_and_a_reused_key_is_refused() -> None:
    h = harness()
    await h.configure()
    commands = h.scheduler.commands
    first = await commands.handle(UpdateQueue(_q("acme", 8000), "req"))
    assert await commands.handle(UpdateQueue(_q("acme", 8000), "req")) == first
    with pytest.raises(Conflict, match="request_id 'req' was already used for QueueUpdated of 'acme'"):
        await commands.handle(UpdateQueue(_q("acme", 9000), "req"))
    with pytest.raises(Conflict):
        await commands.handle(DefinePriorityClass("high", 5, "req"))
    assert [n for n, _ in await h.recorded()].count("QueueUpdated") == 1
    assert h.projection.queues["acme"].quotas[0].guaranteed == 8000
