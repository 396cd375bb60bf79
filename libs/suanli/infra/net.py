"""Small socket helpers shared by the launchers."""

from __future__ import annotations

import socket
import struct


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def preferred_loopback_port(port: int) -> int:
    """``port`` on 127.0.0.1 when it is free a moment ago, else any free port.

    Well-known ports let a user reach a local platform without looking its addresses up, and falling
    back keeps a second platform (or anything else on that port) from stopping this one.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return free_loopback_port()
        return port


def accepts_tcp(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def kafka_metadata_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Send a Metadata v0 request and check that a well-formed answer comes back.

    A raw request rather than a client library: the launcher must work from sync code and from
    inside a running event loop alike, and a listening socket alone does not mean the broker serves.
    """
    correlation_id = 0x5A4E
    client_id = b"suanli-probe"
    # api_key=3 (Metadata), api_version=0, correlation id, client id, empty topic array = all topics
    body = struct.pack(">hhih", 3, 0, correlation_id, len(client_id)) + client_id + struct.pack(">i", 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = _recv_exact(sock, 8)
    except OSError:
        return False
    if header is None:
        return False
    size, answered_id = struct.unpack(">ii", header)
    return size >= 4 and answered_id == correlation_id


def _recv_exact(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data
