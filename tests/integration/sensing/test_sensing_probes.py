"""Real probes on loopback: two agents' probe listeners measured for RTT and bandwidth by the TCP prober, a
stopped listener seen as loss 1.0; and a simulated fleet on the real broker whose faults file, written
while it runs, partitions a region in the `LinkMeasured` it publishes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from suanli.bus import topic_name
from suanli.resources import default_catalogue
from suanli.resources.network import measured_network
from suanli.sensing.adapters.bus import ensure_agent_topics
from suanli.sensing.adapters.probes import Peer, TcpLinkProber, start_probe_listener
from suanli.sensing.bootstrap import build_fleet_host
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.domain.links import SiteRef
from suanli.sensing.entrypoints.runtime import RunSettings
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.ports import EventSink

from .test_sensing_agent_bus import FAST, running, tail

MIB = 1024 * 1024


async def _listener() -> tuple[asyncio.Server, int]:
    server = await start_probe_listener("127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_two_real_listeners_give_rtt_and_bandwidth_and_a_stopped_one_loss() -> None:
    a, port_a = await _listener()
    b, port_b = await _listener()
    try:
        peers = [
            Peer("127.0.0.1", port_a, SiteRef("frankfurt", "fra1")),
            Peer("127.0.0.1", port_b, SiteRef("tokyo", "tok1")),
        ]
        prober = TcpLinkProber(
            SiteRef("washington-dc", "wdc1"),
            peers,
            probes_per_round=3,
            timeout_s=1.0,
            bandwidth_every=2,
            bandwidth_bytes=2 * MIB,
        )
        first = await prober.probe_round(1)
        assert [s.dst_site for s in first] == ["fra1", "tok1"]
        for sample in first:
            assert sample.loss_ratio == 0.0 and sample.samples == 3 and sample.rtt_ms > 0
            # 2 MiB over loopback: far above 100 Mbit/s on any machine, and a real figure, not a cap.
            assert sample.bandwidth_mbps is not None and sample.bandwidth_mbps > 100
        second = await prober.probe_round(2)
        assert all(s.bandwidth_mbps is None and s.loss_ratio == 0.0 for s in second)  # not a bandwidth round

        b.close()
        await b.wait_closed()
        third = await prober.probe_round(3)
        up, down = third
        assert up.loss_ratio == 0.0 and up.bandwidth_mbps is not None and up.bandwidth_mbps > 100
        assert (down.dst_site, down.loss_ratio, down.rtt_ms, down.bandwidth_mbps) == ("tok1", 1.0, 0.0, 0.0)
    finally:
        a.close()
        await a.wait_closed()


async def test_a_listener_sends_at_most_its_cap_and_ignores_garbage() -> None:
    server = await start_probe_listener("127.0.0.1", 0, max_transfer_bytes=MIB)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"SUANLI-BW 999999999\n")
        await writer.drain()
        received = len(await asyncio.wait_for(reader.read(), 10))
        writer.close()
        assert received == MIB
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.0\r\n\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


FLEET = {
    "name": "it-faults",
    "seed": 5,
    "regions": [
        {
            "name": region,
            "sites": [{"name": site, "zone": f"{region}-1", "node_groups": [{"name": "cpu", "count": 1}]}],
        }
        for region, site in (("washington-dc", "wdc1"), ("frankfurt", "fra1"), ("tokyo", "tok1"))
    ],
}


async def test_a_faults_file_written_mid_run_partitions_a_region_on_the_topic(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    fleet = parse_fleet(FLEET, default_catalogue(), measured_network())
    faults = tmp_path / "faults.yaml"
    settings = RunSettings(
        kafka_bootstrap,
        f"{topic_prefix}-faults",
        topic_prefix,
        interval_s=0.5,
        probe_interval_s=1.0,
        consumer=FAST,
    )

    def build(sink: EventSink) -> AgentHost:
        return build_fleet_host(fleet, sink, interval_s=0.5, default_duration_s=60.0, faults_path=faults)

    async with (
        tail(kafka_bootstrap, topic_name("links.measured", topic_prefix)) as seen,
        running(settings, build),
    ):
        await seen.until(lambda: len(seen.named("LinkMeasured")) >= 6, "a round of the 6 site pairs")
        healthy = seen.named("LinkMeasured")[:6]
        assert all(r["loss_ratio"] < 1.0 for r in healthy)
        wdc_fra = next(r for r in healthy if (r["src_site"], r["dst_site"]) == ("wdc1", "fra1"))
        assert abs(wdc_fra["rtt_ms"] - measured_network().region_rtt_ms[("washington-dc", "frankfurt")]) < 10

        written_at = time.monotonic()
        faults.write_text("faults:\n  - {kind: partition, region: tokyo}\n")

        def partitioned_round() -> bool:
            records = seen.named("LinkMeasured")
            tokyo = [r for r in records[-6:] if "tokyo" in (r["src_region"], r["dst_region"])]
            return len(tokyo) == 4 and all(r["loss_ratio"] == 1.0 for r in tokyo)

        await seen.until(partitioned_round, "a round with every tokyo link lost")
        assert time.monotonic() - written_at < 10
        last = seen.named("LinkMeasured")[-6:]
        others = [r for r in last if "tokyo" not in (r["src_region"], r["dst_region"])]
        assert len(others) == 2 and all(r["loss_ratio"] < 1.0 and r["rtt_ms"] > 50 for r in others)
