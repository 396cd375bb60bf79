"""The command topic on the real broker and PostgreSQL: commands on jobs.commands, answers on
jobs.replies, invalid commands on jobs.commands.dlq with the reason (docs/commands.md)."""

from __future__ import annotations

import runpy
import uuid
from pathlib import Path
from typing import Any

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import EventPublisher, topic_name
from suanli.bus.headers import DLQ_ERROR_MESSAGE, DLQ_REASON
from suanli.scheduling.entrypoints.app import SchedulingApp

from .helpers import TopicReader, config, envelope, publish, started, stub, until

pytestmark = pytest.mark.timeout(120)

SPEC = """
name: etl
queue: acme
tasks:
  - name: w
    resources: {cpu: "1", memory: 1Gi}
    command: python etl.py
    duration: 5s
"""
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ENVELOPE = ("event_id", "occurred_at", "producer", "subject_id")


def submission(request_id: str, spec: str = SPEC, tenant: str = "acme") -> dict[str, Any]:
    return {
        **envelope(request_id),
        "request_id": request_id,
        "tenant": tenant,
        "principal": "cmdb/alice",
        "spec": spec,
    }


def cancellation(request_id: str, job_id: str, tenant: str = "acme") -> dict[str, Any]:
    return {
        **envelope(request_id),
        "request_id": request_id,
        "tenant": tenant,
        "principal": "workflow",
        "job_id": job_id,
        "reason": "workflow aborted",
    }


async def command(bootstrap: str, prefix: str, name: str, record: dict[str, Any]) -> None:
    await publish(bootstrap, prefix, "jobs.commands", record["request_id"], name, record)


def body(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply without its envelope and the command's own event id: what two copies share."""
    return {k: v for k, v in reply.items() if k not in (*ENVELOPE, "command_event_id")}


async def test_submit_twice_makes_one_job_with_identical_replies_and_cancel_by_command(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    request_id = f"cmdb-{uuid.uuid4().hex[:8]}"
    try:
        async with (
            TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.replies") as replies,
            TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.events") as events,
        ):
            first, second = submission(request_id), submission(request_id)
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", first)
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", second)
            answers = await replies.wait_for(lambda n, r: r["request_id"] == request_id, 2)
            assert body(answers[0]) == body(answers[1])
            answer = answers[0]
            assert answer["ok"] and answer["code"] == "OK" and not answer["dead_lettered"]
            assert answer["command"] == "JobSubmissionRequested" and answer["tenant"] == "acme"
            assert {a["command_event_id"] for a in answers} == {first["event_id"], second["event_id"]}
            job_id = answer["job_id"]

            listed = await api.ListJobs(pb.ListJobsRequest(queue="acme"))
            assert [j.id for j in listed.jobs] == [job_id]  # one job for the two copies
            job = await api.GetJob(pb.GetJobRequest(job_id=job_id))
            task = job.spec.tasks[0]
            assert (job.spec.name, task.command, list(task.args)) == ("etl", "python", ["etl.py"])
            [submitted] = await events.wait_for(lambda n, r: n == "JobSubmitted" and r["job_id"] == job_id)
            assert submitted["principal"]["subject"] == "cmdb/alice"
            assert submitted["principal"]["tenant"] == "acme"

            # The same request_id with another spec is a conflict, answered like the RPC's.
            other = submission(request_id, SPEC.replace("etl", "other"))
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", other)
            [conflict] = await replies.wait_for(lambda n, r: r["command_event_id"] == other["event_id"], 1)
            assert (conflict["ok"], conflict["code"], conflict["dead_lettered"]) == (
                False,
                "ALREADY_EXISTS",
                False,
            )
            assert request_id in conflict["message"]

            cancel = cancellation(f"wf-{uuid.uuid4().hex[:8]}", job_id)
            await command(kafka_bootstrap, topic_prefix, "JobCancellationRequested", cancel)
            [cancelled] = await replies.wait_for(lambda n, r: r["request_id"] == cancel["request_id"])
            assert (cancelled["ok"], cancelled["code"], cancelled["job_id"]) == (True, "OK", job_id)
            job = await api.GetJob(pb.GetJobRequest(job_id=job_id))
            assert job.state == pb.JOB_STATE_CANCELLED
            [fact] = await events.wait_for(lambda n, r: n == "JobCancelled" and r["job_id"] == job_id)
            assert fact["reason"] == "workflow aborted"
            assert fact["requested_by"] == "workflow@acme via jobs.commands"

            # Cancelling a job of another tenant: not found, as over gRPC; answered, not dead-lettered.
            foreign = cancellation(f"wf-{uuid.uuid4().hex[:8]}", job_id, tenant="initech")
            await command(kafka_bootstrap, topic_prefix, "JobCancellationRequested", foreign)
            [missing] = await replies.wait_for(lambda n, r: r["request_id"] == foreign["request_id"])
            assert (missing["ok"], missing["code"], missing["dead_lettered"]) == (False, "NOT_FOUND", False)
    finally:
        await channel.close()
        await app.stop()


async def test_invalid_commands_go_to_the_dead_letter_topic_and_are_answered(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    bad_spec = submission("bad-spec", SPEC.replace('cpu: "1"', 'cpu: "lots"'))
    foreign = submission("foreign-queue", tenant="initech")  # acme's queue, initech's command
    no_tenant = {**submission("no-tenant"), "tenant": ""}
    try:
        async with (
            TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.replies") as replies,
            TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.commands.dlq") as dead,
        ):
            for record in (bad_spec, foreign, no_tenant):
                await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", record)
            async with EventPublisher(kafka_bootstrap) as bus:  # not Avro at all, keyed by its request id
                await bus.publish_raw(topic_name("jobs.commands", topic_prefix), b"garbled", b"\x00junk", [])
            wanted = {"bad-spec", "foreign-queue", "no-tenant", "garbled"}
            answers = {
                r["request_id"]: r for r in await replies.wait_for(lambda n, r: r["request_id"] in wanted, 4)
            }
            for request_id, reply in answers.items():
                assert not reply["ok"] and reply["dead_lettered"], request_id
                assert reply["job_id"] == "" and "dead-lettered" in reply["message"], request_id
            assert answers["bad-spec"]["code"] == "INVALID_ARGUMENT"
            assert "spec.tasks[0].resources.cpu" in answers["bad-spec"]["message"]
            assert answers["foreign-queue"]["code"] == "PERMISSION_DENIED"
            assert answers["no-tenant"]["code"] == "INVALID_ARGUMENT"
            assert "tenant: is required" in answers["no-tenant"]["message"]
            assert answers["garbled"]["code"] == "INVALID_ARGUMENT"
            assert answers["garbled"]["message"].startswith("undecodable command")

            await dead.wait_for(lambda n, r: True, 4)
            reasons = {
                h.get(DLQ_ERROR_MESSAGE, b"").decode(): h.get(DLQ_REASON, b"").decode()
                for _, _, h in dead.records
            }
            assert any("spec.tasks[0].resources.cpu" in m for m in reasons)
            assert any("belongs to another tenant" in m for m in reasons)
            assert set(reasons.values()) == {"handler", "decode"}
            # Nothing was submitted, and the consumer goes on: a valid command after them is carried out.
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", submission("good"))
            [good] = await replies.wait_for(lambda n, r: r["request_id"] == "good")
            assert good["ok"]
            listed = await api.ListJobs(pb.ListJobsRequest())
            assert [j.id for j in listed.jobs] == [good["job_id"]]
    finally:
        await channel.close()
        await app.stop()


async def test_the_producer_example_gets_its_reply(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    example = runpy.run_path(str(EXAMPLES / "commands" / "submit_by_command.py"))
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    try:
        reply = await example["submit_by_command"](
            kafka_bootstrap, SPEC, tenant="acme", request_id="example-1", prefix=topic_prefix
        )
        assert (reply["ok"], reply["code"], reply["request_id"]) == (True, "OK", "example-1")
        assert reply["job_id"] in app.c.projection.jobs
    finally:
        await app.stop()


async def test_only_the_leader_answers_and_the_next_leader_takes_the_topic_over(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, instance="first")
    first = await started(cfg)
    second = await started(
        config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, schema=cfg.store_schema, instance="second"),
        leader=False,
    )
    running = [first, second]
    try:
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.replies") as replies:
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", submission("before"))
            [before] = await replies.wait_for(lambda n, r: r["request_id"] == "before")
            assert before["ok"] and before["producer"] == "scheduling/first"

            running.remove(first)
            await first.stop()  # a graceful hand-over: the standby's election follows
            await until(lambda: _leads(second), timeout=20, what="the standby takes over")
            await command(kafka_bootstrap, topic_prefix, "JobSubmissionRequested", submission("after"))
            [after] = await replies.wait_for(lambda n, r: r["request_id"] == "after")
            assert after["ok"] and after["producer"] == "scheduling/second"
            # The standby never answered "before", and the new leader did not handle it again.
            assert [r["request_id"] for _, r, _ in await replies.poll()] == ["before", "after"]
            assert {before["job_id"], after["job_id"]} <= set(second.c.projection.jobs)
    finally:
        for app in running:
            await app.stop()


async def _leads(app: SchedulingApp) -> bool:
    return app.is_leader and bool(app.c.projection.queues)
