"""One scheduler with a small fleet for the console tests of a module (alone, or with billing, routing
and serving), and the console in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from suanli.console.gateway import Targets
from suanli.console.server import RunningConsole

from .consolekit import Fleet, console, fleet, platform


@pytest.fixture(scope="module")
async def scheduler(
    pg_dsn: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Fleet]:
    # Module scope: one service start serves every test of a module (the machine is shared).
    async with fleet(pg_dsn, kafka_bootstrap, tmp_path_factory.mktemp("console")) as f:
        yield f


@pytest.fixture(scope="module")
async def web(scheduler: Fleet) -> AsyncIterator[RunningConsole]:
    # No billing or routing: those pages say so (tests/integration/console/test_console_auth.py has both).
    async with console(Targets(scheduler.address)) as running:
        yield running


@pytest.fixture(scope="module")
async def full_web(
    pg_dsn: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningConsole, Fleet]]:
    """The console in front of the four services, each with data to show (consolekit.platform)."""
    async with (
        platform(pg_dsn, kafka_bootstrap, tmp_path_factory.mktemp("console-full")) as (f, targets),
        console(targets) as running,
    ):
        yield running, f
