"""Readiness probes for supervised services."""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from suanli.cli.config import bearer_channel


def grpc_serving(address: str, timeout_s: float = 1.0, ca_pem: bytes | None = None) -> bool:
    """True when the gRPC health service at `address` answers SERVING for the whole server (over TLS
    trusting ``ca_pem`` when given)."""
    try:
        with bearer_channel(address, "", ca_pem) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
    except grpc.RpcError:
        return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when a GET of ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False
