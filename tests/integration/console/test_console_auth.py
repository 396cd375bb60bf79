"""The console in front of the four services with authentication on: the browser's token must be the
console's own and the scheduler must still accept it; the network, charges and services pages from
the real routing, billing and serving services."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from auth.authkit import Platform, platform
from scheduling.helpers import until

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.auth.principal import Role
from suanli.console.gateway import Targets

from .consolekit import client, console, log_in

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
async def plat(
    pg_dsn: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Platform]:
    async with platform(pg_dsn, kafka_bootstrap, tmp_path_factory.mktemp("console-auth")) as p:
        yield p


def targets(p: Platform) -> Targets:
    return Targets(p.scheduler, p.billing, p.routing, p.serving)


async def test_only_the_consoles_own_token_logs_in(plat: Platform) -> None:
    admin = plat.tokens[Role.PLATFORM_ADMIN]
    async with console(targets(plat), admin) as web, client() as http:
        assert not web.key_generated and web.login_key == admin
        for other in (plat.tokens[Role.VIEWER], plat.tokens[Role.TENANT_ADMIN], "garbage"):
            async with http.post(f"{web.url}login", data={"token": other}, allow_redirects=False) as response:
                assert response.status == 401
        await log_in(http, web)
        async with http.get(f"{web.url}network") as response:
            assert response.status == 200
            text = await response.text()
        # authkit published one region path, cn-east -> cn-west, on network.links.
        assert '<th scope="row">cn-east</th>' in text and "ms<br><small>loss" in text
        async with http.get(f"{web.url}charges") as response:
            assert response.status == 200
            text = await response.text()
        for tenant in ("acme", "globex"):
            assert f'data-tenant="{tenant}"' in text
        async with http.get(f"{web.url}queues") as response:
            assert "acme/team" in await response.text()
        async with http.get(f"{web.url}services") as response:
            assert "No inference services." in await response.text()  # serving answered: none yet


async def test_a_revoked_token_no_longer_logs_in(plat: Platform) -> None:
    token_id, token = await plat.issue(Role.PLATFORM_ADMIN, tenant="")
    async with console(targets(plat), token) as web, client() as http:
        await plat.ledger.revoke(token_id, "test", "console test")
        metadata = (("authorization", f"Bearer {token}"),)
        channel = plat.channel(plat.scheduler)

        async def refused() -> bool:
            try:
                await pb_grpc.SchedulerStub(channel).ListQueues(pb.ListQueuesRequest(), metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                return exc.code() is grpc.StatusCode.UNAUTHENTICATED
            return False

        await until(refused, what="the scheduler refuses the revoked token")
        async with http.post(f"{web.url}login", data={"token": token}, allow_redirects=False) as response:
            assert response.status == 401
            assert "did not accept it" in await response.text()
