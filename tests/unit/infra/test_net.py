"""The well-known-port helper: the port asked for when free, another when it is taken."""

from __future__ import annotations

import socket

from suanli.infra.net import free_loopback_port, preferred_loopback_port


def test_a_free_preferred_port_is_the_port_given() -> None:
    port = free_loopback_port()
    assert preferred_loopback_port(port) == port


def test_a_taken_preferred_port_gives_another_free_one() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = preferred_loopback_port(port)
        assert other != port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", other))  # it really was free
