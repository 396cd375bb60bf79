"""Network-aware placement through the running scheduler on the real broker and PostgreSQL: the network
view comes from NetworkLinkChanged records on network.links, RTT-bound jobs land near their data, a gang
stays in one region and avoids a region behind a DOWN link, explain shows NETWORK_CONSTRAINT region by
region, placed tasks are not stopped for a network change, and garbage on network.links is dead-lettered."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.scheduling.domain.network import LinkStatus

from .helpers import (
    TopicReader,
    capacity,
    config,
    envelope,
    publish,
    publish_raw,
    started,
    stub,
    task_spec,
    until,
)

pytestmark = pytest.mark.timeout(120)

REGIONS = ("tokyo", "osaka", "dallas")


def link(src: str, dst: str, rtt_ms: float, status: str = "OK", reason: str = "") -> dict[str, Any]:
    link_id = f"region:{src}->{dst}"
    return {
        **envelope(link_id),
        "link_id": link_id,
        "scope": "region",
        "src_region": src,
        "src_site": "",
        "dst_region": dst,
        "dst_site": "",
        "rtt_ms": rtt_ms,
        "jitter_p95_ms": 0.5,
        "loss_ratio": 1.0 if status == "DOWN" else 0.0,
        "bandwidth_mbps": None,
        "last_probe_at": datetime.now(UTC),
        "status": status,
        "reason": reason,
        "rounds": 3,
    }


def job(name: str, replicas: int = 1, **network: Any) -> pb.SubmitJobRequest:
    spec = pb.JobSpec(name=name, queue="acme", tasks=[task_spec("w", replicas=replicas)], **network)
    return pb.SubmitJobRequest(spec=spec)


async def test_network_links_steer_placement_and_explain_says_why(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)

    async def send_link(*args: Any, **kw: Any) -> None:
        record = link(*args, **kw)
        await publish(
            kafka_bootstrap, topic_prefix, "network.links", record["link_id"], "NetworkLinkChanged", record
        )

    try:
        for region in REGIONS:
            node = f"{region}-1"
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "capacity.nodes",
                node,
                "NodeCapacityChanged",
                capacity(node, gpus=4, region=region),
            )
        await until(lambda: _nodes(api, 3), what="capacity view")
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            # No network view yet: an RTT bound cannot be proven, the job waits and says so per region;
            # a job without network fields places as before.
            near = (await api.SubmitJob(job("near", data_region="tokyo", max_rtt_ms=20))).job
            plain = (await api.SubmitJob(job("plain"))).job
            await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == plain.id)
            why = await until(
                lambda: _explained(api, near.id, "NETWORK_CONSTRAINT"), what="NETWORK_CONSTRAINT"
            )
            assert {v.region: v.verdict for v in why.regions} == {r: "no network view yet" for r in REGIONS}

            # The view arrives: the job lands in tokyo or osaka (8 ms), never dallas (140 ms).
            await send_link("osaka", "tokyo", 8.0)
            await send_link("dallas", "tokyo", 140.0)
            [placed] = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == near.id)
            assert placed["region"] in ("tokyo", "osaka")
            assert placed["rtt_ms"] == (0.0 if placed["region"] == "tokyo" else 8.0)
            assert placed["price_per_hour"] is not None and placed["price_per_hour"] > 0
            shown = await api.GetJob(pb.GetJobRequest(job_id=near.id))
            assert shown.tasks[0].region == placed["region"] and shown.tasks[0].rtt_ms == placed["rtt_ms"]
            assert list(shown.regions) == [placed["region"]] and shown.price_per_hour > 0
            assert app.c.network.age_s() is not None  # the metric's source: the view heard from routing

            # osaka goes DOWN: a new gang of 4 (region locality by default) avoids it and stays together.
            await send_link("osaka", "tokyo", 8.0, "DOWN", "no probe for 31 s")
            await until(lambda: _status(app, "osaka", "tokyo", LinkStatus.DOWN), what="DOWN in the view")
            gang = (await api.SubmitJob(job("gang", replicas=4, data_region="tokyo", max_rtt_ms=200))).job
            got = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == gang.id, 4)
            regions = {r["region"] for r in got}
            assert len(regions) == 1 and "osaka" not in regions

            # A data region nobody has measured: NETWORK_CONSTRAINT with every region's verdict.
            far = (await api.SubmitJob(job("far", data_region="sydney", max_rtt_ms=50))).job
            why = await until(
                lambda: _explained(api, far.id, "NETWORK_CONSTRAINT"), what="NETWORK_CONSTRAINT"
            )
            assert {v.region: v.verdict for v in why.regions} == {
                r: "no RTT measured to sydney" for r in REGIONS
            }
            assert "data region sydney" in why.pending_reason.message

            # The gang's region is cut off from its data now: its placed tasks are left alone.
            (gang_region,) = regions
            if gang_region != "tokyo":
                await send_link(gang_region, "tokyo", 140.0, "DOWN", "partitioned")
                await until(lambda: _status(app, gang_region, "tokyo", LinkStatus.DOWN), what="partition")
            cycles = app.c.scheduler.cycles.count
            await until(lambda: _cycled(app, cycles + 3), what="three more cycles")
            after = await api.GetJob(pb.GetJobRequest(job_id=gang.id))
            assert [t.state for t in after.tasks] == ["PLACED"] * 4
            stops = [
                n for n, r, _ in await placements.poll() if r.get("job_id") == gang.id and n != "TaskPlaced"
            ]
            assert stops == []

            # Garbage and impossible figures on network.links go to its dead-letter topic; the view holds.
            await publish_raw(kafka_bootstrap, topic_prefix, "network.links", b"\xc3\x01garbage")
            await send_link("tokyo", "osaka", -5.0)
            async with TopicReader(kafka_bootstrap, f"{topic_prefix}.network.links.dlq") as dlq:
                await dlq.wait_for(lambda n, r: True, count=2)
            assert app.c.network.snapshot().path("tokyo", "osaka")[0] == 8.0  # the reverse, as before
            assert (await api.GetJob(pb.GetJobRequest(job_id=plain.id))).tasks[0].state == "PLACED"
    finally:
        await channel.close()
        await app.stop()


async def _nodes(api, count: int) -> bool:  # type: ignore[no-untyped-def]
    return len((await api.ListNodes(pb.ListNodesRequest())).nodes) >= count


async def _explained(api, job_id: str, code: str):  # type: ignore[no-untyped-def]
    answer = await api.ExplainJob(pb.ExplainJobRequest(job_id=job_id))
    return answer if answer.pending_reason.code == code else None


async def _status(app, src: str, dst: str, status: LinkStatus) -> bool:  # type: ignore[no-untyped-def]
    return bool(app.c.network.snapshot().path(src, dst)[2] is status)


async def _cycled(app, count: int) -> bool:  # type: ignore[no-untyped-def]
    return bool(app.c.scheduler.cycles.count >= count)
