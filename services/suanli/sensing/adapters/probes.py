"""Real network probes: TCP connect round-trip time to peer agents, and the listener peers connect to.

A TCP handshake needs no privileges (unlike ICMP ping) and measures one round trip through the same
firewalls task traffic crosses. A probe that does not connect within the timeout counts as lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from suanli.sensing.domain.links import LinkSample, SiteRef, summarise


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    port: int
    site: SiteRef

    @classmethod
    def parse(cls, text: str) -> Peer:
        """``host:port=region/site`` (the location defaults to ``host:port`` itself)."""
        address, _, location = text.partition("=")
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"peer {text!r}: expected host:port[=region/site]")
        region, _, site = location.partition("/")
        name = f"{host}:{port}"
        return cls(host.strip("[]"), int(port), SiteRef(region or name, site or name))


class TcpLinkProber:
    def __init__(
        self,
        source: SiteRef,
        peers: Sequence[Peer],
        *,
        probes_per_round: int = 5,
        timeout_s: float = 2.0,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._source = source
        self._peers = tuple(peers)
        self._probes = probes_per_round
        self._timeout_s = timeout_s
        self._timer = timer

    async def probe_round(self, round_no: int) -> list[LinkSample]:
        return list(await asyncio.gather(*(self._probe_peer(peer) for peer in self._peers)))

    async def _probe_peer(self, peer: Peer) -> LinkSample:
        rtts = [await self._connect_rtt_ms(peer) for _ in range(self._probes)]
        return summarise(self._source, peer.site, rtts)

    async def _connect_rtt_ms(self, peer: Peer) -> float | None:
        started = self._timer()
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(peer.host, peer.port), self._timeout_s)
        except (OSError, TimeoutError):
            return None
        elapsed_ms = (self._timer() - started) * 1000
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return elapsed_ms


async def start_probe_listener(host: str, port: int) -> asyncio.Server:
    """Accept and close at once: peers only time the handshake."""

    async def _accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    return await asyncio.start_server(_accept, host, port)
