"""`suanli console`: serve the web console for the services of the selected client context."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Annotated

import typer

from suanli.cli import bill, config, network, service
from suanli.cli.client import (
    BUILTIN_ADDRESS,
    DEFAULT_ADDRESS,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Failure,
    SchedulerOption,
    fail,
)
from suanli.console.gateway import Targets
from suanli.console.server import (
    DEFAULT_LISTEN,
    DEFAULT_REFRESH_S,
    RunningConsole,
    split_listen,
    start_console,
)

# Unlike `suanli service`'s, no built-in default: a platform without serving (`suanli up` runs none) gets
# a Services page saying so, not one saying localhost:50056 does not answer.
ServingAddr = Annotated[
    str,
    typer.Option(
        "--serving",
        envvar=service.ADDR_ENV,
        metavar="HOST:PORT",
        show_default=False,
        help=f"Serving gRPC address (env {service.ADDR_ENV}; default: the config context's, else none: "
        "the Services page says serving is not configured).",
    ),
]


def console(
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help="Where the console listens; loopback by default (docs/console.md before opening it wider).",
        ),
    ] = DEFAULT_LISTEN,
    refresh: Annotated[
        float,
        typer.Option(
            "--refresh", min=0.2, metavar="SECONDS", help="How often live pages ask the services again."
        ),
    ] = DEFAULT_REFRESH_S,
    address: SchedulerOption = DEFAULT_ADDRESS,
    billing: bill.Addr = bill.DEFAULT_ADDR,
    routing: network.Addr = network.DEFAULT_ADDR,
    serving: ServingAddr = "",
) -> None:
    """Serve the web console: capacity, nodes, queues, jobs, inference services, network and charges, live.

    It calls the services with the context's token (and CA); a browser logs in with that same token.
    """
    try:
        split_listen(listen)
        targets = Targets(
            config.server("scheduler", address, BUILTIN_ADDRESS),
            config.server("billing", billing, bill.BUILTIN_ADDR),
            config.server("routing", routing, network.BUILTIN_ADDR),
            config.server("serving", serving, ""),
        )
        token, ca_pem = config.token(), config.ca()
    except (config.ConfigError, ValueError) as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    try:
        asyncio.run(_serve(targets, token, ca_pem, listen, refresh))
    except OSError as exc:
        raise fail(Failure(f"cannot listen on {listen}: {exc.strerror or exc}", EXIT_UNREACHABLE)) from None


async def _serve(targets: Targets, token: str, ca_pem: bytes | None, listen: str, refresh: float) -> None:
    running = await start_console(targets, token, ca_pem, listen, refresh)
    _announce(running)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # platforms without signal handlers on the loop
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await running.stop()


def _announce(running: RunningConsole) -> None:
    typer.echo(f"Suanli console at {running.url}")
    if running.key_generated:
        # No token in the context (a platform without authentication): the browser still logs in.
        typer.echo(f"log in with this key (made up for this run): {running.login_key}")
    else:
        typer.echo("log in with the context's token (`suanli auth` / the context in the config file)")
    typer.echo("Ctrl-C stops it.")
