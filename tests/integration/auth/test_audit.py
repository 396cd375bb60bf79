"""The principal on command events and `suanli audit`: who submitted and cancelled which job, who issued
and revoked which token, read back from PostgreSQL, filterable by tenant, subject and time."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from click.testing import Result
from pagekit import HINT, assert_pages, assert_refuses_garbage, follow
from scheduling.helpers import task_spec
from typer.testing import CliRunner

from suanli.api.scheduler.v1 import scheduler_pb2 as spb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as spb_grpc
from suanli.auth.principal import Role
from suanli.cli.main import app
from suanli.contracts import decode
from suanli.eventstore import PostgresEventStore

from .authkit import OTHER, OWN, Platform, bearer

RUNNER = CliRunner(env={"COLUMNS": "300"})


def stores(plat: Platform, dsn: str) -> list[str]:
    """The options that point `suanli audit` at the platform's event store and token ledger."""
    return ["--dsn", dsn, "--scheduling-schema", plat.scheduling_schema, "--auth-schema", plat.auth_schema]


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
        result = RUNNER.invoke(app, ["audit", "-o", "csv", "--no-headers", *args, *schemas])
        assert result.exit_code == 0, result.output
        # Each entry as its cells joined by one separator (csv: a cell may hold commas).
        return [" | ".join(row) for row in csv.reader(io.StringIO(result.stdout))]

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
