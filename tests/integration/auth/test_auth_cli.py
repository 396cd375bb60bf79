"""`suanli auth init | token create | list | revoke` and the CLI's config contexts, against the real
services of the package fixture (authentication on) and the real token ledger in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
import yaml
from click.testing import Result
from pagekit import assert_pages, assert_refuses_garbage, follow
from typer.testing import CliRunner

from suanli.api.scheduler.v1 import scheduler_pb2 as spb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as spb_grpc
from suanli.auth.principal import Role
from suanli.cli.main import app
from suanli.infra.polling import until

from .authkit import Platform, bearer

RUNNER = CliRunner(
    env={"COLUMNS": "240", "SUANLI_TOKEN": None, "SUANLI_CONFIG": None, "SUANLI_CONTEXT": None}
)


async def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run `suanli ARGS` off the event loop (the services under test run on it)."""
    return await asyncio.to_thread(RUNNER.invoke, app, list(args), env=env)


async def test_init_create_list_revoke(plat: Platform, pg_dsn: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    schema = plat.auth_schema
    ledger = ["--dsn", pg_dsn, "--schema", schema]

    made = await cli("auth", "init", "--home", str(home))
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE((home / "auth" / "signing-key.pem").stat().st_mode) == 0o600
    again = await cli("auth", "init", "--home", str(home))
    assert again.exit_code == 2 and "suanli auth key rotate" in again.output

    # The services verify with the package's key: sign with that one (its home is tmp/auth's parent).
    key_home = str(plat.keys.directory.parent)
    created = await cli(
        "auth", "token", "create", "-s", "carol", "-t", "acme", "-r", "viewer", "--ttl", "1h",
        "--home", key_home, *ledger,
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    queues = await api.ListQueues(spb.ListQueuesRequest(), metadata=bearer(token), timeout=10)
    assert {q.name for q in queues.queues} == {"acme", "acme/team"}

    listed = await cli("auth", "token", "list", *ledger)
    assert listed.exit_code == 0, listed.output
    carol = next(line.split() for line in listed.output.splitlines() if "carol" in line)
    token_id = carol[0]
    assert carol[1:4] == ["carol", "acme", "viewer"] and carol[-2:] == ["-", "-"]  # not revoked

    revoked = await cli("auth", "token", "revoke", token_id, "--reason", "left", *ledger)
    assert revoked.exit_code == 0, revoked.output
    after = await cli("auth", "token", "list", "-o", "json", *ledger)
    (record,) = [t for t in json.loads(after.stdout)["tokens"] if t["id"] == token_id]
    assert record["revoked"] and record["reason"] == "left"
    assert record["revoked_by"].startswith("os:")  # and by whom (the operator's OS user)
    wide = await cli("auth", "token", "list", "-o", "wide", "--no-headers", *ledger)
    assert next(line for line in wide.output.splitlines() if token_id in line).endswith("left")
    twice = await cli("auth", "token", "revoke", token_id, *ledger)
    assert twice.exit_code == 2 and "already revoked" in twice.output
    unknown = await cli("auth", "token", "revoke", "tok-nope", *ledger)
    assert unknown.exit_code == 2 and "no token 'tok-nope'" in unknown.output

    bad_role = await cli("auth", "token", "create", "-s", "x", "-r", "root", "--home", key_home, *ledger)
    assert bad_role.exit_code == 2
    no_tenant = await cli("auth", "token", "create", "-s", "x", "-r", "viewer", "--home", key_home, *ledger)
    assert no_tenant.exit_code == 2 and "needs a tenant" in no_tenant.output


async def test_the_cli_reads_server_and_token_from_its_context(plat: Platform, tmp_path: Path) -> None:
    from suanli.auth.principal import Role

    config = tmp_path / "config.yaml"
    member = plat.tokens[Role.TENANT_MEMBER]
    config.write_text(
        yaml.safe_dump(
            {
                "current-context": "lab",
                "contexts": [
                    {"name": "lab", "scheduler": plat.scheduler, "token": member},
                    {"name": "anon", "scheduler": plat.scheduler},
                ],
            }
        )
    )
    env = {"SUANLI_CONFIG": str(config)}
    listed = await cli("queues", env=env)
    assert listed.exit_code == 0, listed.output
    assert "acme/team" in listed.output and "globex" not in listed.output

    anonymous = await cli("--context", "anon", "queues", env=env)
    assert (
        anonymous.exit_code == 3 and "UNAUTHENTICATED" in anonymous.output and "--token" in anonymous.output
    )

    # --token beats the context's token; SUANLI_TOKEN too.
    admin = plat.tokens[Role.PLATFORM_ADMIN]
    flagged = await cli("--context", "anon", "--token", admin, "queues", env=env)
    assert flagged.exit_code == 0 and "globex" in flagged.output
    by_env = await cli("--context", "anon", "queues", env={**env, "SUANLI_TOKEN": admin})
    assert by_env.exit_code == 0 and "globex" in by_env.output

    missing = await cli("--context", "nope", "queues", env=env)
    assert missing.exit_code == 2 and "no context 'nope'" in missing.output


@pytest.mark.parametrize("code", [grpc.StatusCode.PERMISSION_DENIED])
async def test_a_denied_call_says_why(plat: Platform, tmp_path: Path, code: grpc.StatusCode) -> None:
    from suanli.auth.principal import Role

    viewer = plat.tokens[Role.VIEWER]
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: try\nqueue: acme\ntasks:\n  - name: w\n    command: sleep\n    args: ['1']\n"
        "    resources: {cpu: 1, memory: 1Gi}\n"
    )
    denied = await cli("--token", viewer, "job", "submit", str(spec), "--scheduler", plat.scheduler)
    assert denied.exit_code == 3 and f"{code.name}: role viewer may not call SubmitJob" in denied.output


async def test_token_list_pages_newest_first(plat: Platform, pg_dsn: str) -> None:
    for _ in range(5):
        await plat.issue(Role.VIEWER)
    ledger = ["--dsn", pg_dsn, "--schema", plat.auth_schema]

    def run(extra: Sequence[str]) -> Result:
        return RUNNER.invoke(app, ["auth", "token", "list", "-o", "json", *extra, *ledger])

    def parse(stdout: str) -> list[tuple[str, str]]:
        return [(t["issued"], t["id"]) for t in json.loads(stdout)["tokens"]]

    everything = parse((await asyncio.to_thread(run, ["--limit", "0"])).stdout)
    assert len(everything) >= 5
    pages = await asyncio.to_thread(follow, run, parse, 2)
    assert_pages(pages, everything, newest=lambda row: row[0])
    await asyncio.to_thread(assert_refuses_garbage, run)


async def test_keys_rotate_without_downtime_and_retire(plat: Platform, pg_dsn: str, tmp_path: Path) -> None:
    """A key of its own home in the package's ledger: the services trust it from the ledger alone (their
    key file is the package's), keep trusting its tokens after a rotation, and refuse them once retired."""
    home = ["--home", str(tmp_path / "home")]
    ledger = ["--dsn", pg_dsn, "--schema", plat.auth_schema]
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))

    async def token() -> str:
        made = await cli("auth", "token", "create", "-s", "grafana", "-r", "service", *home, *ledger)
        assert made.exit_code == 0, made.output
        return made.stdout.strip().splitlines()[-1]

    async def answer(token: str) -> grpc.StatusCode:
        try:
            await api.ListNodes(spb.ListNodesRequest(), metadata=bearer(token), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK

    async def becomes(token: str, code: grpc.StatusCode) -> None:
        async def probe() -> bool:
            return await answer(token) is code

        await until(probe, timeout=10, what=f"{code.name} for the token")

    async def keys() -> dict[str, str]:
        listed = await cli("auth", "key", "list", "-o", "json", *ledger)
        assert listed.exit_code == 0, listed.output
        return {k["id"]: k["status"] for k in json.loads(listed.stdout)["keys"]}

    made = await cli("auth", "init", *home, *ledger)
    assert made.exit_code == 0, made.output
    first = made.stdout.split("(key id ")[1].split(")")[0]
    assert (await keys())[first] == "active"
    old = await token()
    await becomes(old, grpc.StatusCode.OK)  # within one refresh of the ledger, no restart

    rotated = await cli("auth", "key", "rotate", *home, *ledger)
    assert rotated.exit_code == 0, rotated.output
    second = rotated.stdout.split("new key ")[1].split()[0]
    assert f"old key {first} still verifies until `suanli auth key retire {first}`" in rotated.stdout
    new = await token()
    await becomes(new, grpc.StatusCode.OK)
    assert await answer(old) is grpc.StatusCode.OK  # both valid until the old key is retired
    assert {first: "active", second: "active"}.items() <= (await keys()).items()

    retired = await cli("auth", "key", "retire", first, "--reason", "rotated", *ledger)
    assert retired.exit_code == 0, retired.output
    await becomes(old, grpc.StatusCode.UNAUTHENTICATED)
    assert await answer(new) is grpc.StatusCode.OK
    assert (await keys())[first] == "retired"
    again = await cli("auth", "key", "retire", first, *ledger)
    assert again.exit_code == 2 and "already retired" in again.output
    unknown = await cli("auth", "key", "retire", "0123456789abcdef", *ledger)
    assert unknown.exit_code == 2 and "no signing key" in unknown.output
