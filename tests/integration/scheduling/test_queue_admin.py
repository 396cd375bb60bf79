"""Queue administration over gRPC on the real broker and PostgreSQL: a created queue admits at once, quota
and cohort changes count from the next cycle, deletes keep live jobs their queue, bad input is refused
naming the field, retries are idempotent, and a restart rebuilds the queue set from its events (the queue
file only seeds an empty store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc

from .helpers import TopicReader, capacity, config, envelope, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(150)

GPU = "gpu:A100"


async def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details() or ""


def _queue(name: str, guaranteed: int, cohort: str = "", **limits: int) -> pb.QueueSpec:
    return pb.QueueSpec(
        name=name, cohort=cohort, quotas=[pb.QuotaSpec(flavour=GPU, guaranteed=guaranteed, **limits)]
    )


async def _submit(api: pb_grpc.SchedulerStub, queue: str, gpus: int, **spec: Any) -> pb.Job:
    job_spec = pb.JobSpec(name=f"j{gpus}", queue=queue, tasks=[task_spec("w", gpu_count=gpus)], **spec)
    return (await api.SubmitJob(pb.SubmitJobRequest(spec=job_spec))).job


async def _reason(api: pb_grpc.SchedulerStub, job_id: str) -> str | None:
    explained = await api.ExplainJob(pb.ExplainJobRequest(job_id=job_id))
    return explained.pending_reason.code or None


async def _quota_exceeded(api: pb_grpc.SchedulerStub, job_id: str) -> bool:
    return await _reason(api, job_id) == "QUOTA_EXCEEDED"


async def _report(bootstrap: str, prefix: str, name: str, placed: list[dict[str, Any]]) -> None:
    """What the node's agent would say about these placed tasks: TaskStarted, or TaskFinished (exit 0)."""
    for t in placed:
        base = {"task_id": t["task_id"], "job_id": t["job_id"], "node_id": t["node_id"], "attempt": 1}
        extra = {"exit_code": 0} if name == "TaskFinished" else {}
        record = {**envelope(t["task_id"]), **base, **extra}
        await publish(bootstrap, prefix, "tasks.lifecycle", t["task_id"], name, record)


async def _running(api: pb_grpc.SchedulerStub, *jobs: pb.Job) -> bool:
    states = [(await api.GetJob(pb.GetJobRequest(job_id=job.id))).state for job in jobs]
    return states == [pb.JOB_STATE_RUNNING] * len(jobs)


async def test_a_created_queue_admits_at_once_and_quota_and_cohort_changes_count_next_cycle(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1", 8)
        )
        await until(lambda: _has_nodes(api), what="capacity view")
        async with (
            TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements,
            TopicReader(kafka_bootstrap, f"{topic_prefix}.queues.events") as admin,
        ):
            created = await api.CreateQueue(pb.CreateQueueRequest(queue=_queue("acme/vision", 2000)))
            assert (created.name, created.cohort, [r.guaranteed for r in created.resources]) == (
                "acme/vision",
                "",
                [2000],
            )
            assert not created.resources[0].HasField("maximum")
            [event] = await admin.wait_for(lambda n, r: n == "QueueCreated" and r["name"] == "acme/vision")
            assert event["quotas"][0]["resource"] == GPU and event["quotas"][0]["guaranteed"] == 2000

            # admits at once: the first job is placed, the second would pass the guarantee and waits
            first = await _submit(api, "acme/vision", 1)
            placed = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == first.id)
            second = await _submit(api, "acme/vision", 2)
            await until(lambda: _quota_exceeded(api, second.id), what="second job over quota")

            # a raised quota admits it on the next cycle
            raised = await api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme/vision", 3000)))
            assert raised.resources[0].guaranteed == 3000
            placed += await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == second.id)
            await _report(kafka_bootstrap, topic_prefix, "TaskStarted", placed)
            await until(lambda: _running(api, first, second), what="both jobs running")

            # a lowered quota stops admissions from the next cycle; what runs keeps running
            await api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme/vision", 1000)))
            third = await _submit(api, "acme/vision", 1)
            await until(lambda: _quota_exceeded(api, third.id), what="third job over the lowered quota")
            assert await _running(api, first, second)
            records = await placements.poll()
            assert not [r for n, r, _ in records if n == "TaskPreempted"]
            usage = (await api.GetQueue(pb.GetQueueRequest(name="acme/vision"))).resources[0]
            assert (usage.used, usage.borrowed) == (3000, 2000)

            # without a cohort a queue never passes its guarantee; in one, it borrows what others leave
            await api.CreateQueue(pb.CreateQueueRequest(queue=_queue("acme/a", 1000)))
            await api.CreateQueue(pb.CreateQueueRequest(queue=_queue("acme/b", 2000)))
            borrower = await _submit(api, "acme/a", 2)
            await until(lambda: _quota_exceeded(api, borrower.id), what="no cohort, no borrowing")
            await api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme/a", 1000, "pool")))
            await api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme/b", 2000, "pool")))
            await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == borrower.id)
            lent = (await api.GetQueue(pb.GetQueueRequest(name="acme/a"))).resources[0]
            assert (lent.used, lent.borrowed) == (2000, 1000)
            listed = {q.name: q for q in (await api.ListQueues(pb.ListQueuesRequest())).queues}
            assert listed["acme/a"].cohort == listed["acme/b"].cohort == "pool"

            # delete: never while children or live jobs need the queue
            code, details = await _code(api.DeleteQueue(pb.DeleteQueueRequest(name="acme/vision")))
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert details == (
                "queue 'acme/vision' has 1 pending and 2 running job(s); "
                "cancel them or wait for them to finish"
            )
            code, details = await _code(api.DeleteQueue(pb.DeleteQueueRequest(name="acme")))
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert details == "queue 'acme' has child queue(s) acme/a, acme/b, acme/vision; delete them first"

            await api.CancelJob(pb.CancelJobRequest(job_id=third.id, reason="queue goes away"))
            await _report(kafka_bootstrap, topic_prefix, "TaskFinished", placed)

            async def deleted() -> bool:
                try:
                    await api.DeleteQueue(pb.DeleteQueueRequest(name="acme/vision"))
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                        return False  # the finish reports are still on their way
                    raise
                return True

            await until(deleted, what="acme/vision deleted once its jobs ended")
            await admin.wait_for(lambda n, r: n == "QueueDeleted" and r["name"] == "acme/vision")
        code, _ = await _code(api.GetQueue(pb.GetQueueRequest(name="acme/vision")))
        assert code == grpc.StatusCode.NOT_FOUND
        code, details = await _code(_submit(api, "acme/vision", 1))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("spec.queue: unknown queue")
    finally:
        await channel.close()
        await app.stop()


async def test_bad_queue_requests_are_refused_naming_the_field_and_retries_are_idempotent(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    try:

        def create(queue: pb.QueueSpec | None, request_id: str = "") -> Any:
            return api.CreateQueue(pb.CreateQueueRequest(queue=queue, request_id=request_id))

        bad_quota = pb.QueueSpec(name="acme/x", quotas=[pb.QuotaSpec(flavour="gpus", guaranteed=1)])
        twice = pb.QueueSpec(
            name="acme/x", quotas=[pb.QuotaSpec(flavour=GPU, guaranteed=1), pb.QuotaSpec(flavour=GPU)]
        )
        cases = [
            (create(None), invalid, "queue: is required"),
            (create(pb.QueueSpec()), invalid, "queue.name: is required"),
            (
                create(_queue("nope/x", 1000)),
                invalid,
                "queue.name: parent queue 'nope' does not exist; create it first",
            ),
            (
                create(_queue("acme/x", 1000, maximum=500)),
                invalid,
                "queue.quotas[0].maximum: 500 is below guaranteed 1000",
            ),
            (
                create(_queue("acme/x", 1000, lending_limit=2000)),
                invalid,
                "queue.quotas[0].lending_limit: must be in 0..guaranteed (1000), got 2000",
            ),
            (
                create(_queue("acme/x", -1)),
                invalid,
                "queue.quotas[0].guaranteed: must be 0..1000000000000 (got -1)",
            ),
            (
                create(bad_quota),
                invalid,
                "queue.quotas[0].flavour: must be 'cpu', 'memory' or 'gpu:<model>' (got 'gpus')",
            ),
            (create(twice), invalid, "queue.quotas[1].flavour: 'gpu:A100' is listed twice (also at [0])"),
            (
                create(_queue("acme/x", 1, "Bad Cohort")),
                invalid,
                "queue.cohort: must be a cohort name of lowercase letters, digits and '-', at most 63 "
                "characters, starting and ending with a letter or digit (got 'Bad Cohort')",
            ),
            (
                create(_queue("acme", 1000)),
                grpc.StatusCode.ALREADY_EXISTS,
                "queue 'acme' already exists; change it with UpdateQueue",
            ),
            (
                api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme/missing", 1))),
                grpc.StatusCode.NOT_FOUND,
                "queue 'acme/missing' not found",
            ),
            (
                api.DeleteQueue(pb.DeleteQueueRequest(name="acme/missing")),
                grpc.StatusCode.NOT_FOUND,
                "queue 'acme/missing' not found",
            ),
            (api.DeleteQueue(pb.DeleteQueueRequest()), invalid, "name: is required"),
            (
                api.DefinePriorityClass(
                    pb.DefinePriorityClassRequest(priority_class=pb.PriorityClass(name="Urgent!", value=1))
                ),
                invalid,
                "priority_class.name: must be a priority class name of lowercase letters, digits and '-', at "
                "most 63 characters, starting and ending with a letter or digit (got 'Urgent!')",
            ),
            (
                api.DeletePriorityClass(pb.DeletePriorityClassRequest(name="missing")),
                grpc.StatusCode.NOT_FOUND,
                "priority class 'missing' not found",
            ),
        ]
        for call, want_code, want_details in cases:
            assert await _code(call) == (want_code, want_details)

        # a class a live job names stays (the cycle would find the job's class unknown)
        job = await _submit(api, "acme", 1, priority_class="high")
        code, details = await _code(api.DeletePriorityClass(pb.DeletePriorityClassRequest(name="high")))
        assert (code, details) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "priority class 'high' is named by 1 pending and 0 running job(s); wait for them to finish",
        )
        await api.CancelJob(pb.CancelJobRequest(job_id=job.id))
        await api.DeletePriorityClass(pb.DeletePriorityClassRequest(name="high"))
        classes = (await api.ListPriorityClasses(pb.ListPriorityClassesRequest())).priority_classes
        assert [(c.name, c.value) for c in classes] == [("low", 0)]

        # idempotent by request_id: a retry answers the first outcome and records nothing more
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.queues.events") as admin:
            first = await create(_queue("acme/r", 1000), "req-1")
            again = await create(_queue("acme/r", 1000), "req-1")
            assert first == again
            code, details = await _code(create(_queue("acme/r", 2000), "req-1"))
            assert (code, details) == (
                grpc.StatusCode.ALREADY_EXISTS,
                "request_id 'req-1' was already used for QueueCreated of 'acme/r' with another request",
            )
            delete = pb.DeleteQueueRequest(name="acme/r", request_id="req-2")
            assert (await api.DeleteQueue(delete)).name == "acme/r"
            assert (await api.DeleteQueue(delete)).name == "acme/r"  # a retry, not NOT_FOUND
            await admin.wait_for(lambda n, r: n == "QueueDeleted" and r["name"] == "acme/r")
            records = await admin.poll()
        names = [(n, r["name"]) for n, r, _ in records if r.get("request_id") in ("req-1", "req-2")]
        assert names == [("QueueCreated", "acme/r"), ("QueueDeleted", "acme/r")]
    finally:
        await channel.close()
        await app.stop()


async def test_a_restart_rebuilds_the_queue_set_from_events_and_ignores_a_changed_file(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path)
    app = await started(cfg)
    channel, api = stub(app)
    try:
        await api.CreateQueue(
            pb.CreateQueueRequest(queue=_queue("acme/nlp", 4000, "teams", borrowing_limit=2000))
        )
        await api.UpdateQueue(pb.UpdateQueueRequest(queue=_queue("acme", 32000)))
        await api.DefinePriorityClass(
            pb.DefinePriorityClassRequest(priority_class=pb.PriorityClass(name="urgent", value=900))
        )
        await api.DefinePriorityClass(
            pb.DefinePriorityClassRequest(priority_class=pb.PriorityClass(name="high", value=200))
        )
        await api.DeletePriorityClass(pb.DeletePriorityClassRequest(name="low"))
        before = await api.ListQueues(pb.ListQueuesRequest())
        classes = await api.ListPriorityClasses(pb.ListPriorityClassesRequest())
    finally:
        await channel.close()
        await app.stop()
    assert [(c.name, c.value) for c in classes.priority_classes] == [("urgent", 900), ("high", 200)]
    assert {q.name for q in before.queues} == {"acme", "acme/nlp"}

    # The same store, a different file: the events win, the file is not applied.
    queues = tmp_path / "changed.yaml"
    queues.write_text("queues:\n  - {name: initech, quotas: {cpu: 1000}}\n")
    restarted = cfg.model_copy(update={"queues_path": queues})
    app = await started(restarted)
    channel, api = stub(app)
    try:
        after = await api.ListQueues(pb.ListQueuesRequest())
        assert after == before
        nlp = (await api.GetQueue(pb.GetQueueRequest(name="acme/nlp"))).resources[0]
        assert (nlp.guaranteed, nlp.borrowing_limit, nlp.HasField("lending_limit")) == (4000, 2000, False)
        again = await api.ListPriorityClasses(pb.ListPriorityClassesRequest())
        assert again == classes
        # and what was rebuilt is live: a job names the class defined before the restart
        job = await _submit(api, "acme/nlp", 1, priority_class="urgent")
        assert job.spec.priority_class == "urgent"
    finally:
        await channel.close()
        await app.stop()


async def _has_nodes(api: pb_grpc.SchedulerStub) -> bool:
    return bool((await api.ListNodes(pb.ListNodesRequest())).nodes)
