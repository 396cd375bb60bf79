"""A real replica's scraper against a local HTTP server: reports from good pages, nothing (logged once per
error) from a server that is not up, errs or writes garbage, and no report once stopped; the launcher
gives a replica task, and only it, its port."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from suanli.clock import ManualClock
from suanli.contracts.load import ReplicaLoad
from suanli.contracts.replica_env import MAX_BATCH_ENV, REPLICA_ENV
from suanli.replica.live import ReplicaIdentity
from suanli.resources import default_catalogue
from suanli.sensing.adapters.processes import ProcessLauncher
from suanli.sensing.adapters.replica_scrape import RealReplicaHosting, ReplicaScraper, free_port
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.placement import Placement
from suanli.sensing.domain.replica_metrics import Fallbacks
from suanli.sensing.service_layer.ports import LaunchError

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def metrics(running: int, finished: int, latency_sum_s: float) -> str:
    return (
        f"vllm:num_requests_running {running}\nvllm:num_requests_waiting 0\n"
        f"vllm:request_success_total {finished}\n"
        f"vllm:e2e_request_latency_seconds_count {finished}\n"
        f"vllm:e2e_request_latency_seconds_sum {latency_sum_s}\n"
    )


class Page:
    """What the test server answers on /metrics: a status and a text the test changes."""

    def __init__(self) -> None:
        self.status = 200
        self.text = metrics(1, 0, 0.0)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Page, str]]:
    page = Page()

    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=page.status, text=page.text)

    app = web.Application()
    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield page, f"127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


def scraper(address: str, reports: list[ReplicaLoad], interval_s: float = 1.0) -> ReplicaScraper:
    async def publish(load: ReplicaLoad) -> None:
        reports.append(load)

    identity = ReplicaIdentity("svc-x", "svc-x-r1", "r1", address)
    return ReplicaScraper(
        identity, Fallbacks(max_batch=4), interval_s=interval_s, on_report=publish, clock=ManualClock(T0)
    )


async def test_each_scrape_reports_the_page_and_the_latency_of_its_interval(served: tuple[Page, str]) -> None:
    page, address = served
    s = scraper(address, [])
    try:
        first = await s.scrape()
        assert first is not None and (first.in_flight, first.max_batch, first.address) == (1, 4, address)
        assert first.reported_at == T0 and first.recent_latency_s == 0.0
        page.text = metrics(2, 2, 3.0)
        second = await s.scrape()
        assert second is not None and (second.finished_total, second.recent_latency_s) == (2, 1.5)
        page.text = metrics(0, 3, 7.0)
        third = await s.scrape()
        assert third is not None and third.recent_latency_s == 4.0
    finally:
        await s.stop()


async def test_failed_scrapes_report_nothing_and_each_error_is_logged_once(
    served: tuple[Page, str], caplog: pytest.LogCaptureFixture
) -> None:
    page, address = served
    s = scraper(address, [])
    caplog.set_level(logging.WARNING, "suanli.sensing.adapters.replica_scrape")
    try:
        page.text = "<html>loading</html>"
        assert await s.scrape() is None and await s.scrape() is None
        page.status = 503
        assert await s.scrape() is None and await s.scrape() is None
        page.status, page.text = 200, metrics(1, 0, 0.0)
        assert await s.scrape() is not None  # it answers again: reports resume
    finally:
        await s.stop()
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2
    assert "MetricsError: not Prometheus text" in logged[0] and "ClientResponseError: 503" in logged[1]


async def test_a_server_not_listening_yet_reports_nothing() -> None:
    s = scraper(f"127.0.0.1:{free_port('127.0.0.1')}", [])
    try:
        assert await s.scrape() is None
    finally:
        await s.stop()


async def test_reports_go_out_every_interval_and_stop_when_cancelled(served: tuple[Page, str]) -> None:
    _, address = served
    reports: list[ReplicaLoad] = []
    s = scraper(address, reports, interval_s=0.02)
    s.start()
    for _ in range(200):
        if len(reports) >= 3:
            break
        await asyncio.sleep(0.01)
    assert len(reports) >= 3
    s.cancel()
    await asyncio.sleep(0)  # the loop sees its cancellation
    sent = len(reports)
    await asyncio.sleep(0.1)
    assert len(reports) == sent
    await s.stop()


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port("127.0.0.1")))


class Published:
    """An agent's sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        self.events.append((event_name, record))


async def test_only_a_replica_task_is_given_a_port_and_a_bad_max_batch_refuses_it(tmp_path: Path) -> None:
    hosting = RealReplicaHosting(
        NodeIdentity("n1", "r1", "z", "s"),
        Published(),
        ManualClock(T0),
        lambda: uuid.uuid4(),
        host="127.0.0.1",
        interval_s=60.0,
        catalogue=default_catalogue(),
    )
    launcher = ProcessLauncher("n1", log_dir=tmp_path, replicas=hosting)
    show = (sys.executable, "-c", "import os; print(os.environ.get('SUANLI_SERVICE_PORT', '-'))")
    replica = {REPLICA_ENV: "svc-x-r1", MAX_BATCH_ENV: "8"}
    for task_id, env in (("plain", {}), ("replica", replica)):
        task = await launcher.launch(Placement(task_id, "j", "n1", 1, command=show, env=env))
        assert await task.wait() == 0
    assert (tmp_path / "plain.1.log").read_text().strip() == "-"
    assert int((tmp_path / "replica.1.log").read_text()) > 0
    with pytest.raises(LaunchError, match="SUANLI_SERVICE_MAX_BATCH='0' is not 1 or more"):
        await launcher.launch(
            Placement("bad", "j", "n1", 1, command=show, env={**replica, MAX_BATCH_ENV: "0"})
        )
