"""Real network probes: TCP connect round-trip time and bounded-transfer bandwidth to peer agents, and the
listener peers connect to.

A TCP handshake needs no privileges (unlike ICMP ping) and measures one round trip through the same
firewalls task traffic crosses. A probe that does not connect within the timeout counts as lost.

Bandwidth (every Nth round): the prober asks the peer's listener for a bounded transfer
(``SUANLI-BW <bytes>\\n``, at most `MAX_TRANSFER_BYTES`) and times the bytes received between the first
and the last chunk, so the connect and request round trips are not counted as transfer time; the transfer
is cut at the time cap and what arrived by then is the measure. A peer that cannot be reached measures
0 Mbit/s. An RTT probe sends nothing and closes, so the listener tells the two apart by the first line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from suanli.sensing.domain.links import LinkSample, SiteRef, summarise

BANDWIDTH_REQUEST = b"SUANLI-BW "
DEFAULT_BANDWIDTH_BYTES = 4 * 1024 * 1024
MAX_TRANSFER_BYTES = 64 * 1024 * 1024  # what a listener sends at most, whatever it is asked for
_CHUNK = 256 * 1024
_REQUEST_WAIT_S = 5.0  # a connection that sends no request line by then is closed


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
        bandwidth_every: int = 0,
        bandwidth_bytes: int = DEFAULT_BANDWIDTH_BYTES,
        bandwidth_timeout_s: float = 5.0,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        if bandwidth_every < 0 or not 0 < bandwidth_bytes <= MAX_TRANSFER_BYTES:
            raise ValueError(f"bad bandwidth probe: every {bandwidth_every} rounds, {bandwidth_bytes} bytes")
        self._source = source
        self._peers = tuple(peers)
        self._probes = probes_per_round
        self._timeout_s = timeout_s
        self._bandwidth_every = bandwidth_every
        self._bandwidth_bytes = bandwidth_bytes
        self._bandwidth_timeout_s = bandwidth_timeout_s
        self._timer = timer

    def measures_bandwidth(self, round_no: int) -> bool:
        """Rounds 1, 1 + N, 1 + 2N, ...: the first round already tells the bandwidth."""
        return self._bandwidth_every > 0 and (round_no - 1) % self._bandwidth_every == 0

    async def probe_round(self, round_no: int) -> list[LinkSample]:
        bandwidth = self.measures_bandwidth(round_no)
        return list(await asyncio.gather(*(self._probe_peer(peer, bandwidth) for peer in self._peers)))

    async def _probe_peer(self, peer: Peer, bandwidth: bool) -> LinkSample:
        rtts = [await self._connect_rtt_ms(peer) for _ in range(self._probes)]
        sample = summarise(self._source, peer.site, rtts)
        if not bandwidth:
            return sample
        # A peer no probe reached is down: 0 without waiting out a transfer's timeout as well.
        mbps = 0.0 if sample.loss_ratio == 1.0 else await self._transfer_mbps(peer)
        return replace(sample, bandwidth_mbps=mbps)

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

    async def _transfer_mbps(self, peer: Peer) -> float:
        deadline = self._timer() + self._bandwidth_timeout_s
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(peer.host, peer.port), self._timeout_s
            )
        except (OSError, TimeoutError):
            return 0.0
        first_at = last_at = 0.0
        first_size = received = 0
        try:
            writer.write(BANDWIDTH_REQUEST + b"%d\n" % self._bandwidth_bytes)
            await writer.drain()
            while received < self._bandwidth_bytes:
                remaining = deadline - self._timer()
                if remaining <= 0:
                    break
                chunk = await asyncio.wait_for(reader.read(_CHUNK), remaining)
                if not chunk:
                    break
                last_at = self._timer()
                if not received:
                    first_at, first_size = last_at, len(chunk)
                received += len(chunk)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        timed_bytes, timed_s = received - first_size, last_at - first_at
        if timed_bytes <= 0 or timed_s <= 0:
            return 0.0
        return timed_bytes * 8 / timed_s / 1e6


async def start_probe_listener(
    host: str, port: int, *, max_transfer_bytes: int = MAX_TRANSFER_BYTES
) -> asyncio.Server:
    """Accept peers' probes: an RTT probe closes at once; a bandwidth request gets the bytes it asked for
    (at most ``max_transfer_bytes``); anything else is closed."""

    async def _accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), _REQUEST_WAIT_S)
            if line.startswith(BANDWIDTH_REQUEST):
                await _send(writer, min(int(line[len(BANDWIDTH_REQUEST) :]), max_transfer_bytes))
        except (OSError, ValueError, TimeoutError):
            pass  # a prober gone mid-transfer, or a request that is not one: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_server(_accept, host, port)


async def _send(writer: asyncio.StreamWriter, size: int) -> None:
    chunk = bytes(_CHUNK)
    while size > 0:
        writer.write(chunk[: min(size, _CHUNK)])
        await writer.drain()
        size -= _CHUNK
