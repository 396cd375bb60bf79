"""What authentication costs per call (not a test): token verification alone (uncached: a token's first
call; cached: the calls after), and a unary gRPC round trip through the kernel's `AuthInterceptor`
against the same server without it.

The server answers `/suanli.routing.v1.Routing/GetNetwork` with an empty matrix from a generic handler, so
the figure is the interceptor's share (metadata lookup, EdDSA verification, the policy table) and not a
service's work. One client, sequential calls, on loopback.

    .venv/bin/python bench/auth.py                 # 20,000 verifications, 3,000 calls each way
    .venv/bin/python bench/auth.py --calls 10000
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import time
from collections.abc import Sequence

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.api.routing.v1 import routing_pb2_grpc as pb_grpc
from suanli.auth.interceptor import Authenticator, AuthInterceptor
from suanli.auth.principal import Role
from suanli.auth.tokens import Grant, TokenVerifier, sign
from suanli.cli.config import aio_bearer_channel


def _token(key: Ed25519PrivateKey) -> str:
    now = int(time.time())
    return sign(Grant("bench", "acme", frozenset({Role.TENANT_MEMBER}), "tok-bench", now, now + 3600), key)


def verify_rate(verifier: TokenVerifier, token: str, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        verifier.verify(token, time.time())
    return (time.perf_counter() - start) / count * 1e6


async def _get_network(request: pb.GetNetworkRequest, context: grpc.aio.ServicerContext) -> pb.NetworkMatrix:
    return pb.NetworkMatrix()


async def round_trips(
    interceptors: Sequence[grpc.aio.ServerInterceptor], token: str, calls: int
) -> list[float]:
    server = grpc.aio.server(interceptors=interceptors)
    handler = grpc.unary_unary_rpc_method_handler(
        _get_network,
        request_deserializer=pb.GetNetworkRequest.FromString,
        response_serializer=pb.NetworkMatrix.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("suanli.routing.v1.Routing", {"GetNetwork": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    took: list[float] = []
    try:
        async with aio_bearer_channel(f"127.0.0.1:{port}", token) as channel:
            stub = pb_grpc.RoutingStub(channel)
            for _ in range(200):
                await stub.GetNetwork(pb.GetNetworkRequest())  # warm
            for _ in range(calls):
                start = time.perf_counter()
                await stub.GetNetwork(pb.GetNetworkRequest())
                took.append((time.perf_counter() - start) * 1e3)
    finally:
        await server.stop(None)
    return took


def _q(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


async def main(args: argparse.Namespace) -> None:
    key = Ed25519PrivateKey.generate()
    token = _token(key)
    verifier = TokenVerifier(key.public_key())
    # Uncached: what every first call of a token (and every bad token) costs.
    per_verify = verify_rate(TokenVerifier(key.public_key(), cache_size=0), token, args.verifications)
    per_cached = verify_rate(verifier, token, args.verifications)
    interceptor = AuthInterceptor(Authenticator(verifier))
    # Interleaved, so a change in the machine's load hits both sides alike.
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):
        off += await round_trips((), "", args.calls // args.rounds)
        on += await round_trips((interceptor,), token, args.calls // args.rounds)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}")
    n = args.verifications
    print(f"token verification: {per_verify:.1f} us uncached, {per_cached:.1f} us cached (n = {n})")
    for name, took in (("auth off", off), ("auth on ", on)):
        p50, p99 = _q(took, 50), _q(took, 99)
        print(f"{name}: GetNetwork round trip p50 {p50:.3f} ms, p99 {p99:.3f} ms (n = {len(took)})")
    print(f"interceptor share at p50: {_q(on, 50) - _q(off, 50):.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--verifications", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
