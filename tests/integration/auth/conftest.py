"""One platform (scheduling, billing, routing with authentication on) for the whole auth package."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .authkit import Platform, platform


@pytest.fixture(scope="package")
async def plat(
    pg_dsn: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Platform]:
    async with platform(pg_dsn, kafka_bootstrap, tmp_path_factory.mktemp("auth")) as p:
        yield p
