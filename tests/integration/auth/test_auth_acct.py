"""`suanli acct` and `suanli job describe` against the real scheduling and billing services with
authentication on: per-job CU-hours and billed amounts come from billing's charges of the job, and a role
that may not read charges still gets the scheduler's figures, with the reason on stderr."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import grpc
from click.testing import Result
from scheduling.helpers import capacity, publish, task_spec, until
from typer.testing import CliRunner

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as spb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as spb_grpc
from suanli.auth.principal import Role
from suanli.cli.main import app

from .authkit import OWN, Platform, bearer

RUNNER = CliRunner(
    env={"COLUMNS": "240", "SUANLI_TOKEN": None, "SUANLI_CONFIG": None, "SUANLI_CONTEXT": None}
)
NODE = "acct-n1"


async def cli(*args: str) -> Result:
    return await asyncio.to_thread(RUNNER.invoke, app, list(args))


def usage(job_id: str, task_id: str, end: datetime, seconds: int, cu: float) -> dict[str, Any]:
    """One UsageMetered window, as metering writes it: `cu` CU of H200 for `seconds`."""
    start = end - timedelta(seconds=seconds)
    return {
        "event_id": str(uuid.uuid4()),
        "occurred_at": end,
        "producer": "test/metering",
        "subject_id": task_id,
        "task_id": task_id,
        "job_id": job_id,
        "tenant": OWN,
        "queue": "acme/team",
        "node_id": NODE,
        "window_start": start,
        "window_end": end,
        "cu_seconds": {"h200": cu * seconds},
        "gpu_milli_seconds": 1000 * seconds,
        "cpu_milli_seconds": 0,
        "attempt": 1,
        "efficiency": None,
    }


async def test_acct_sums_the_jobs_charges_and_a_member_still_gets_the_schedulers_figures(
    plat: Platform, kafka_bootstrap: str
) -> None:
    admin = bearer(plat.tokens[Role.PLATFORM_ADMIN])
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    spec = spb.JobSpec(name="acct-job", queue="acme/team", tasks=[task_spec("w")])
    job = (await api.SubmitJob(spb.SubmitJobRequest(spec=spec), metadata=admin, timeout=10)).job

    # Billing rates usage once it knows the job (from jobs.events) and the node's region.
    await publish(kafka_bootstrap, plat.prefix, "capacity.nodes", NODE, "NodeCapacityChanged", capacity(NODE))
    now = datetime.now(UTC).replace(microsecond=0)
    for end in (now - timedelta(minutes=30), now):
        record = usage(job.id, job.tasks[0].task_id, end, 1800, 10.0)
        await publish(
            kafka_bootstrap, plat.prefix, "usage.metered", record["task_id"], "UsageMetered", record
        )
    billing = bpb_grpc.BillingStub(plat.channel(plat.billing))

    async def charged() -> list[bpb.Charge] | None:
        request = bpb.ListChargesRequest(tenant=OWN, job_id=job.id)
        try:
            found = list((await billing.ListCharges(request, metadata=admin, timeout=10)).charges)
        except grpc.aio.AioRpcError as exc:  # billing has not yet heard of the tenant's first job
            if exc.code() is not grpc.StatusCode.NOT_FOUND:
                raise
            return None
        return found if len(found) == 2 else None

    charges = await until(charged, what="the job's two charges")
    cu_hours = sum((Decimal(c.cu_hours) for c in charges), Decimal(0))
    amount = sum((Decimal(c.amount) for c in charges), Decimal(0))
    assert cu_hours == Decimal(10)  # 10 CU for an hour

    where = ("acct", "--scheduler", plat.scheduler, "--billing", plat.billing, "-q", "acme/team")
    got = await cli("--token", plat.tokens[Role.PLATFORM_ADMIN], *where, "-o", "json")
    assert got.exit_code == 0, got.output
    [entry] = [j for j in json.loads(got.stdout)["jobs"] if j["id"] == job.id]
    assert Decimal(entry["billed"]["cu_hours"]) == cu_hours and Decimal(entry["billed"]["amount"]) == amount
    assert entry["billed"]["charges"] == 2 and entry["billed"]["currency"] == charges[0].currency

    # A tenant member may read its jobs but not charges: the scheduler's columns, and why not the rest.
    member = await cli("--token", plat.tokens[Role.TENANT_MEMBER], *where, "-o", "csv")
    assert member.exit_code == 0, member.output
    assert "billing: PERMISSION_DENIED: role tenant-member may not call ListCharges" in member.stderr
    assert job.id in member.stdout
    described = await cli(
        "--token", plat.tokens[Role.TENANT_MEMBER], "job", "describe", job.id, "--scheduler", plat.scheduler
    )
    assert (
        described.exit_code == 0
        and "submitted to queue acme/team (1 task) by platform-admin-user@acme" in (described.stdout)
    ), described.output
