"""The principal on command events and `suanli audit`: who submitted and cancelled which job, changed
which queue or priority class, created or scaled which inference service, closed which period, issued and
revoked which token, read back from PostgreSQL, filterable by tenant, subject and time."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import grpc
from click.testing import Result
from pagekit import HINT, assert_pages, assert_refuses_garbage, follow
from scheduling.helpers import task_spec
from typer.testing import CliRunner

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as spb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as spb_grpc
from suanli.api.serving.v1 import serving_pb2 as vpb
from suanli.api.serving.v1 import serving_pb2_grpc as vpb_grpc
from suanli.auth.principal import Role
from suanli.cli.main import app
from suanli.contracts import decode
from suanli.eventstore import PostgresEventStore
from suanli.infra.polling import until

from .authkit import OTHER, OWN, Platform, answered, bearer

RUNNER = CliRunner(env={"COLUMNS": "300"})


def stores(plat: Platform, dsn: str) -> list[str]:
    """The options that point `suanli audit` at the platform's event stores and token ledger."""
    return [
        "--dsn",
        dsn,
        "--scheduling-schema",
        plat.scheduling_schema,
        "--serving-schema",
        plat.serving_schema,
        "--billing-schema",
        plat.billing_schema,
        "--auth-schema",
        plat.auth_schema,
    ]


def audit_rows(plat: Platform, dsn: str, *args: str) -> list[list[str]]:
    """`suanli audit` over the platform's stores, as CSV rows (columns as `COLUMNS`)."""
    result = RUNNER.invoke(app, ["audit", "-o", "csv", "--no-headers", *args, *stores(plat, dsn)])
    assert result.exit_code == 0, result.output
    return list(csv.reader(io.StringIO(result.stdout)))


async def test_command_events_name_their_principal_and_audit_lists_them(plat: Platform, pg_dsn: str) -> None:
    member_id, member = await plat.issue(Role.TENANT_MEMBER)
    _, operator = await plat.issue(Role.PLATFORM_ADMIN, tenant="")  # of no tenant
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    spec = spb.JobSpec(name="audited", queue=f"{OWN}/team", tasks=[task_spec("w")])
    job = (await api.SubmitJob(spb.SubmitJobRequest(spec=spec), metadata=bearer(member), timeout=10)).job
    await api.CancelJob(
        spb.CancelJobRequest(job_id=job.id, reason="oops"), metadata=bearer(member), timeout=10
    )
    admin_job = (
        await api.SubmitJob(
            spb.SubmitJobRequest(spec=spb.JobSpec(name="theirs", queue=OTHER, tasks=[task_spec("w")])),
            metadata=bearer(operator),
            timeout=10,
        )
    ).job

    # The events of record carry the principal (JobSubmitted v5, JobCancelled v2).
    async with await PostgresEventStore.connect(pg_dsn, schema=plat.scheduling_schema) as store:
        stream = {e.event_name: decode(e.payload)[1] for e in await store.read(f"job-{job.id}")}
    expected = {"subject": "tenant-member-user", "tenant": OWN, "token_id": member_id}
    assert stream["JobSubmitted"]["principal"] == expected
    assert stream["JobCancelled"]["principal"] == expected
    assert stream["JobCancelled"]["requested_by"] == f"tenant-member-user@{OWN}#{member_id}"

    schemas = stores(plat, pg_dsn)

    def audit(*args: str) -> list[str]:
        # Each entry as its cells joined by one separator (csv: a cell may hold commas).
        return [" | ".join(row) for row in audit_rows(plat, pg_dsn, *args)]

    own = await asyncio.to_thread(audit, "--tenant", OWN)
    submit = next(line for line in own if job.id in line and "submit job" in line)
    assert "tenant-member-user" in submit and member_id in submit and f"queue {OWN}/team" in submit
    assert any(job.id in line and "cancel job" in line and "oops" in line for line in own)
    assert not any(admin_job.id in line for line in own)  # globex's job, by a platform admin

    mine = await asyncio.to_thread(audit, "--subject", "tenant-member-user")
    assert {line for line in mine if job.id in line} == {line for line in own if job.id in line}
    issued = await asyncio.to_thread(audit, "--subject", "test")
    assert any("issue token" in line and member_id in line for line in issued)

    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert not any("submit job" in line for line in await asyncio.to_thread(audit, "--since", later))
    theirs = await asyncio.to_thread(audit, "--tenant", OTHER)
    assert any(admin_job.id in line and "platform-admin-user" in line for line in theirs)
    bad = await asyncio.to_thread(RUNNER.invoke, app, ["audit", "--since", "yesterday", *schemas])
    assert bad.exit_code == 2 and "ISO time" in bad.output


async def test_audit_pages_newest_first_and_continues_past_new_entries(plat: Platform, pg_dsn: str) -> None:
    for _ in range(5):
        await plat.issue(Role.VIEWER)
    where = stores(plat, pg_dsn)

    def run(extra: Sequence[str]) -> Result:
        return RUNNER.invoke(app, ["audit", "--subject", "test", "-o", "csv", "--no-headers", *extra, *where])

    def parse(stdout: str) -> list[list[str]]:
        return list(csv.reader(io.StringIO(stdout)))

    everything = parse((await asyncio.to_thread(run, ["--limit", "0"])).stdout)
    assert len(everything) >= 5 and all(row[4] == "issue token" for row in everything)
    pages = await asyncio.to_thread(follow, run, parse, 2)
    assert_pages(pages, everything, newest=lambda row: row[0])

    # An entry recorded after the first page is newer than it: the rest goes on exactly where it stopped.
    first = await asyncio.to_thread(run, ["--limit", "2"])
    hint = HINT.search(first.stderr)
    assert hint is not None, first.stderr
    await plat.issue(Role.VIEWER)
    rest = await asyncio.to_thread(run, ["--limit", "0", "--continue", hint[2]])
    assert parse(first.stdout) + parse(rest.stdout) == everything
    await asyncio.to_thread(assert_refuses_garbage, run)


async def test_queue_class_service_and_period_changes_name_their_caller(plat: Platform, pg_dsn: str) -> None:
    admin_id, admin = await plat.issue(Role.PLATFORM_ADMIN, tenant="")
    member_id, member = await plat.issue(Role.TENANT_MEMBER)
    scheduler = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    billing = bpb_grpc.BillingStub(plat.channel(plat.billing))
    serving = vpb_grpc.ServingStub(plat.channel(plat.serving))

    queue = spb.QueueSpec(name=f"{OWN}/audited", quotas=[spb.QuotaSpec(flavour="gpu:A100", guaranteed=500)])
    await scheduler.CreateQueue(spb.CreateQueueRequest(queue=queue), metadata=bearer(admin), timeout=10)
    queue.stopped = True
    await scheduler.UpdateQueue(spb.UpdateQueueRequest(queue=queue), metadata=bearer(admin), timeout=10)
    klass = spb.PriorityClass(name="audited", value=7)
    await scheduler.DefinePriorityClass(
        spb.DefinePriorityClassRequest(priority_class=klass), metadata=bearer(admin), timeout=10
    )

    spec = (
        "{name: audited, queue: acme, model: llama-2-7b, min_replicas: 1, max_replicas: 3,"
        " resources: {gpu: 0.5, gpu_models: [A100 80GB SXM]}, target: {concurrency: 4}}"
    )
    created = await serving.CreateService(
        vpb.CreateServiceRequest(spec=spec), metadata=bearer(member), timeout=10
    )
    await serving.ScaleService(
        vpb.ScaleServiceRequest(tenant=OWN, name="audited", replicas=2), metadata=bearer(member), timeout=10
    )

    # Billing learns of acme from a JobSubmitted; until then it refuses a platform admin's close.
    job = spb.JobSpec(name="billed", queue=f"{OWN}/team", tasks=[task_spec("w")])
    await scheduler.SubmitJob(spb.SubmitJobRequest(spec=job), metadata=bearer(member), timeout=10)

    async def billing_knows() -> bool:
        usage = billing.GetUsage(bpb.GetUsageRequest(tenant=OWN), metadata=bearer(admin), timeout=10)
        return await answered(usage, grpc.StatusCode.NOT_FOUND)

    await until(billing_knows, what="billing knows tenant acme")
    invoice = await billing.ClosePeriod(
        bpb.ClosePeriodRequest(tenant=OWN, period="2025-03"), metadata=bearer(admin), timeout=10
    )

    # The close is recorded with its caller (InvoiceIssued v2).
    async with await PostgresEventStore.connect(pg_dsn, schema=plat.billing_schema) as store:
        issued = [decode(e.payload)[1] for e in await store.read(f"billing-{OWN}")]
    closed = next(r for r in issued if r["invoice_id"] == invoice.invoice_id)
    assert closed["closed_by"] == "request"
    assert closed["principal"] == {"subject": "platform-admin-user", "tenant": "", "token_id": admin_id}

    rows = await asyncio.to_thread(audit_rows, plat, pg_dsn, "--tenant", OWN)
    # time, subject, tenant, token, action, target, target_tenant, detail
    by_admin = ["platform-admin-user", "-", admin_id]
    by_member = ["tenant-member-user", OWN, member_id]
    actions = {(row[4], row[5]): row for row in rows}
    assert actions["create queue", f"{OWN}/audited"][1:4] == by_admin
    assert actions["create queue", f"{OWN}/audited"][6:] == [OWN, "gpu:A100 500"]
    assert actions["update queue", f"{OWN}/audited"][7] == "stopped; gpu:A100 500"
    sid = created.service_id
    assert actions["create service", sid][1:4] == by_member
    assert actions["create service", sid][6:] == [OWN, "audited: model llama-2-7b, queue acme"]
    assert actions["scale service", sid][1:4] == by_member
    assert actions["scale service", sid][6:] == [OWN, "1 -> 2 replicas"]
    assert actions["close period", invoice.invoice_id][1:4] == by_admin
    assert actions["close period", invoice.invoice_id][6] == OWN
    assert "period 2025-03-01" in actions["close period", invoice.invoice_id][7]

    # A priority class is no tenant's: it shows under its caller, not under a tenant.
    assert not any(row[4] == "define priority class" for row in rows)
    admins = await asyncio.to_thread(audit_rows, plat, pg_dsn, "--subject", "platform-admin-user")
    defined = next(row for row in admins if row[4] == "define priority class" and row[5] == "audited")
    assert defined[1:4] == by_admin and defined[7] == "value 7"
    assert not any(row[4] == "create service" for row in admins)
