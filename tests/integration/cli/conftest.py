"""The `suanli` CLI against the real scheduling service: one service per module (own schema, own topics)
with three nodes in its capacity view."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from scheduling.helpers import capacity, config, publish, started, stub, until

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .clikit import NODES, QUEUES, Scheduler


@pytest.fixture(scope="module")
async def scheduler(
    pg_dsn: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Scheduler]:
    # Module scope: one service start serves every test of a module (the machine is shared).
    tmp = tmp_path_factory.mktemp("cli-scheduler")
    prefix = f"t-cli-{secrets.token_hex(3)}"
    queues = tmp / "cli-queues.yaml"
    queues.write_text(QUEUES)
    cfg = config(pg_dsn, kafka_bootstrap, prefix, tmp).model_copy(update={"queues_path": queues})
    service = await started(cfg)
    channel, api = stub(service)
    try:
        for node, region in NODES.items():
            record = {**capacity(node, gpus=4, model="A100"), "region": region}
            await publish(kafka_bootstrap, prefix, "capacity.nodes", node, "NodeCapacityChanged", record)

        async def seen() -> bool:
            return len((await api.ListNodes(pb.ListNodesRequest())).nodes) == len(NODES)

        await until(seen, what="capacity view")
        yield Scheduler(service, api, kafka_bootstrap, prefix)
    finally:
        await channel.close()
        await service.stop()
