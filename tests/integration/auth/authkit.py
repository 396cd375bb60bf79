"""Kit of the auth integration tests: the three gRPC services with authentication on, over one key
pair and one token ledger, and a token per role for the tenant ``acme``."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from scheduling.helpers import config, envelope, publish, started, until

from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.auth.ledger import TokenLedger
from suanli.auth.principal import Role
from suanli.auth.tokens import KeyPaths, create_keys, load_private_key
from suanli.billing.entrypoints.service import running
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.clock import SystemClock
from suanli.contracts import default_registry, sample_records
from suanli.eventstore import PostgresEventStore
from suanli.routing.bootstrap import routing_api
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.testing import replica_load
from suanli.sensing.adapters.task_logs import TaskLogs
from suanli.sensing.entrypoints.logs_server import LogsEndpoint
from suanli.sensing.entrypoints.settings import SensingSettings
from suanli.serving.entrypoints.service import running as serving_running
from suanli.serving.entrypoints.settings import ServingSettings

OWN, OTHER = "acme", "globex"
REGION = "cn-east"
QUEUES = """
queues:
  - {name: acme, quotas: {gpu:A100: 8000}}
  - {name: acme/team, quotas: {gpu:A100: 8000}}
  - {name: globex, quotas: {gpu:A100: 8000}}
"""
# A refresh this short lets the revocation test wait on it without slowing anything else.
REFRESH_S = 0.2


@dataclass
class Platform:
    """Addresses of the three services, the ledger and signing key, and a token per role (tenant acme)."""

    scheduler: str
    billing: str
    routing: str
    ledger: TokenLedger
    keys: KeyPaths
    scheduling_schema: str
    auth_schema: str
    prefix: str  # of the topics the services share
    agent_logs: str = ""  # a node agent's logs endpoint (AgentLogs), over ``agent_log_dir``
    agent_log_dir: Path = Path()
    serving: str = ""
    serving_schema: str = ""
    billing_schema: str = ""
    tokens: dict[Role, str] = field(default_factory=dict)
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def channel(self, address: str) -> grpc.aio.Channel:
        if address not in self.channels:
            self.channels[address] = grpc.aio.insecure_channel(address)
        return self.channels[address]

    async def issue(self, role: Role, tenant: str = OWN, ttl_s: int = 3600) -> tuple[str, str]:
        """A new token for ``role`` in ``tenant``: (token id, token)."""
        grant, token = await self.ledger.issue(
            load_private_key(self.keys.private),
            f"{role.value}-user",
            tenant,
            frozenset({role}),
            ttl_s,
            "test",
        )
        return grant.token_id, token


def region_link(src: str, dst: str) -> dict[str, Any]:
    """A NetworkLinkChanged record of the region path ``src`` -> ``dst`` (for network.links)."""
    link_id = f"{src}/{dst}"
    return {
        **sample_records(default_registry().current("NetworkLinkChanged"))[0],
        **envelope(link_id),
        "link_id": link_id,
        "scope": "region",
        "src_region": src,
        "dst_region": dst,
    }


async def _known_region(p: Platform, bootstrap: str, prefix: str) -> None:
    """One path on network.links, so routing knows the region Resolve is asked from."""
    link = region_link(REGION, "cn-west")
    await publish(bootstrap, prefix, "network.links", link["link_id"], "NetworkLinkChanged", link)
    api = rpb_grpc.RoutingStub(p.channel(p.routing))
    admin = bearer(p.tokens[Role.PLATFORM_ADMIN])

    async def known() -> bool:
        resolve = api.Resolve(rpb.ResolveRequest(from_region=REGION), metadata=admin, timeout=5)
        return await answered(resolve, grpc.StatusCode.INVALID_ARGUMENT)

    await until(known, what="routing knows the region")

    async def replica_known() -> bool:
        # Republished on each try: routing's load consumer reads from the newest report on.
        load = matrix_load()
        await publish(bootstrap, prefix, "services.load", MATRIX_SERVICE, "ReplicaLoadReported", load)
        ask = rpb.ResolveReplicaRequest(service_id=MATRIX_SERVICE, policy="least-outstanding")
        return await answered(api.ResolveReplica(ask, metadata=admin, timeout=5), grpc.StatusCode.NOT_FOUND)

    await until(replica_known, what="routing knows the matrix service's replica")


MATRIX_SERVICE = "svc-matrix"


def matrix_load() -> dict[str, Any]:
    """A load report of one replica of MATRIX_SERVICE that stays fresh for the whole run."""
    at = int(time.time() * 1000)
    return replica_load(MATRIX_SERVICE, f"{MATRIX_SERVICE}-r1", REGION, at, interval_s=3600.0)


async def answered(call: Awaitable[Any], not_yet: grpc.StatusCode) -> bool:
    """Whether a call was answered; False when refused with ``not_yet`` (what a later try may not be)."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not_yet:
            return False
        raise
    return True


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@dataclass(frozen=True)
class Companions:
    """The gRPC addresses of billing, routing and serving, and the store schemas of billing and serving."""

    billing: str
    routing: str
    serving: str
    billing_schema: str
    serving_schema: str


async def companions(
    stack: contextlib.AsyncExitStack, pg_dsn: str, kafka_bootstrap: str, prefix: str, **auth: Any
) -> Companions:
    """Billing, routing and serving on the topics of ``prefix``, stopped with ``stack``.
    ``auth``: the settings that turn authentication on (none: off)."""
    billing_cfg = BillingSettings.load(
        {},
        kafka_bootstrap=kafka_bootstrap,
        pg_dsn=pg_dsn,
        topic_prefix=prefix,
        db_schema=f"bil_{secrets.token_hex(4)}",
        listen="127.0.0.1:0",
        **auth,
    )
    routing_cfg = RoutingSettings.load(
        {}, bootstrap=kafka_bootstrap, topic_prefix=prefix, listen="127.0.0.1:0", **auth
    )
    serving_cfg = ServingSettings.load(
        {},
        kafka_bootstrap=kafka_bootstrap,
        pg_dsn=pg_dsn,
        topic_prefix=prefix,
        db_schema=f"srv_{secrets.token_hex(4)}",
        listen="127.0.0.1:0",
        **auth,
    )

    async def routing() -> str:
        api = routing_api(routing_cfg)
        await api.start()
        await asyncio.wait_for(api.ready(), 60)
        stack.push_async_callback(api.stop)
        return f"127.0.0.1:{api.port}"

    # Side by side: most of each start is waiting (migrations, consumer groups joining), and one after
    # the other costs the sum.
    async with asyncio.TaskGroup() as group:
        billing = group.create_task(stack.enter_async_context(running(billing_cfg)))
        routed = group.create_task(routing())
        serving = group.create_task(stack.enter_async_context(serving_running(serving_cfg)))
    return Companions(
        f"127.0.0.1:{billing.result().grpc_port}",
        routed.result(),
        f"127.0.0.1:{serving.result().grpc_port}",
        billing_cfg.db_schema,
        serving_cfg.db_schema,
    )


@contextlib.asynccontextmanager
async def platform(pg_dsn: str, kafka_bootstrap: str, tmp: Path) -> AsyncIterator[Platform]:
    keys = KeyPaths(tmp / "auth")
    create_keys(keys)
    schema = f"auth_{secrets.token_hex(4)}"
    prefix = f"t-auth-{secrets.token_hex(3)}"
    auth: dict[str, Any] = {
        "auth_public_key": keys.public,
        "auth_dsn": pg_dsn,
        "auth_schema": schema,
        "auth_refresh_s": REFRESH_S,
    }
    queues = tmp / "auth-queues.yaml"
    queues.write_text(QUEUES)
    cfg = config(pg_dsn, kafka_bootstrap, prefix, tmp, **auth).model_copy(update={"queues_path": queues})
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(await PostgresEventStore.connect(pg_dsn, schema=schema))
        ledger = TokenLedger(store, SystemClock())
        scheduling = await started(cfg)
        stack.push_async_callback(scheduling.stop)
        others = await companions(stack, pg_dsn, kafka_bootstrap, prefix, **auth)
        log_dir = tmp / "agent-logs"
        log_dir.mkdir()
        agent_settings = SensingSettings.load({}, **auth)
        endpoint = LogsEndpoint(TaskLogs(log_dir, "matrix-node"), "127.0.0.1:0", agent_settings)
        agent_logs = await stack.enter_async_context(endpoint.serving())
        p = Platform(
            f"127.0.0.1:{scheduling.port}",
            others.billing,
            others.routing,
            ledger,
            keys,
            cfg.store_schema,
            schema,
            prefix,
            agent_logs,
            log_dir,
            serving=others.serving,
            serving_schema=others.serving_schema,
            billing_schema=others.billing_schema,
        )
        for role in Role:
            p.tokens[role] = (await p.issue(role))[1]
        await _known_region(p, kafka_bootstrap, prefix)
        try:
            yield p
        finally:
            for channel in p.channels.values():
                await channel.close()
