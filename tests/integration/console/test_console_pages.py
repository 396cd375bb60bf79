"""The console against a real scheduler: every page after login, refusals before it, the event stream."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.console.gateway import Gateway, Targets
from suanli.console.server import COOKIE, BackgroundConsole, RunningConsole

from .consolekit import Fleet, Stream, client, log_in, scheduler_stub

pytestmark = pytest.mark.timeout(120)

PAGES = {
    "/": [
        "Capacity by region and GPU model",
        "cn-east",
        "cn-west",
        "A100",
        "H200",
        "/10<br>",
    ],  # 10 GPUs in all
    "/nodes": ["e1", "e2", "w1", "H200", "GPUs (allocation)"],
    "/queues": ["acme/vision", "globex", "gpu:A100", "pending reasons"],
    "/jobs": ["By state", "pending"],
    # No billing, routing or serving in this console's targets: each page says so instead of failing.
    "/services": ["serving: not configured (no serving address in this console&#x27;s context"],
    "/network": ["routing: no routing service in this console&#x27;s context"],
    "/charges": ["billing: no billing service in this console&#x27;s context"],
}


async def test_requests_without_a_session_are_refused(web: RunningConsole) -> None:
    async with client() as http:
        for path in PAGES:
            async with http.get(f"{web.url}{path.lstrip('/')}", allow_redirects=False) as response:
                assert response.status == 303, path
                assert response.headers["Location"].startswith("/login"), path
        async with http.get(f"{web.url}events?page=/", allow_redirects=False) as response:
            assert response.status == 401
        headers = {"Authorization": "Bearer not-the-key"}
        async with http.get(f"{web.url}nodes", headers=headers, allow_redirects=False) as response:
            assert response.status == 303
        async with http.post(
            f"{web.url}login", data={"token": "not-the-key"}, allow_redirects=False
        ) as response:
            assert response.status == 401
            assert "not this console" in await response.text()
            assert COOKIE not in response.cookies
        async with http.get(f"{web.url}login") as response:
            assert response.status == 200
            assert 'type="password"' in await response.text()


async def test_every_page_loads_after_login(web: RunningConsole) -> None:
    assert web.key_generated  # the scheduler runs without authentication: the console made a key up
    async with client() as http:
        await log_in(http, web)
        for path, expected in PAGES.items():
            async with http.get(f"{web.url}{path.lstrip('/')}") as response:
                assert response.status == 200, path
                assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
                text = await response.text()
            for needle in expected:
                assert needle in text, (path, needle)
            assert f'data-stream="/events?page={path}"' in text
        async with http.get(f"{web.url}static/console.js") as response:
            assert response.status == 200
            assert "EventSource" in await response.text()
        async with http.post(f"{web.url}logout", allow_redirects=False) as response:
            assert response.status == 303
        async with http.get(f"{web.url}nodes", allow_redirects=False) as response:
            assert response.status == 303  # the session is gone


async def test_bearer_token_works_for_scripts(web: RunningConsole) -> None:
    async with client() as http:
        headers = {"Authorization": f"Bearer {web.login_key}"}
        async with http.get(f"{web.url}queues", headers=headers) as response:
            assert response.status == 200
            assert "acme/vision" in await response.text()


async def test_stream_delivers_a_submitted_job_and_its_page(web: RunningConsole, scheduler: Fleet) -> None:
    async with client() as http:
        await log_in(http, web)
        async with http.get(f"{web.url}events?page=/jobs") as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/event-stream"
            stream = Stream(response)
            first = await stream.next_update()
            assert set(first) == {"counts", "jobs"}
            job = await scheduler.submit("stream-me")
            update = await stream.until(lambda fragments: job.id in fragments.get("jobs", ""))
            assert "stream-me" in update["jobs"]

        async with http.get(f"{web.url}jobs/{job.id}") as response:
            assert response.status == 200
            text = await response.text()
        for needle in ("Tasks and placement", "Explanation", "Attempts and use", "Timeline", "stream-me"):
            assert needle in text, needle
        # The whole recorded history on the first showing of the job (DescribeJob), not only what
        # happened while the console watched.
        assert '<li data-event="JobSubmitted">' in text

        # The job page's own stream: the timeline and the attempts follow the placement.
        async with http.get(f"{web.url}events?page=/jobs/{job.id}") as response:
            stream = Stream(response)
            first = await stream.next_update()
            assert set(first) == {
                "job-summary",
                "job-tasks",
                "job-explanation",
                "job-attempts",
                "job-timeline",
            }
            if 'data-event="TaskPlaced"' not in first["job-timeline"]:
                await stream.until(
                    lambda fragments: 'data-event="TaskPlaced"' in fragments.get("job-timeline", "")
                )

        async with http.get(f"{web.url}jobs/no-such-job") as response:
            assert response.status == 404
        async with http.get(f"{web.url}events?page=/nowhere") as response:
            assert response.status == 404


async def test_background_console_serves_from_its_own_thread(scheduler: Fleet) -> None:
    # What `suanli up` (synchronous) would use: the console on a loop of its own, stopped by close().
    targets = Targets(scheduler.address)
    background = await asyncio.to_thread(BackgroundConsole, targets, "", None, "127.0.0.1:0")
    try:
        async with client() as http:
            await log_in(http, background.running)
            async with http.get(f"{background.url}nodes") as response:
                assert response.status == 200
                assert "w1" in await response.text()
    finally:
        await asyncio.to_thread(background.close)
    async with client() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with http.get(background.url):
                pass


async def test_the_gateway_reads_every_page_of_queues_nodes_and_jobs(scheduler: Fleet) -> None:
    await scheduler.submit("paged-1")
    await scheduler.submit("paged-2")
    gateway = Gateway(Targets(scheduler.address), "", None, page_size=1)
    try:
        queues, nodes, jobs = await gateway.queues(), await gateway.nodes(), await gateway.jobs(limit=2)
    finally:
        await gateway.close()
    async with scheduler_stub(scheduler.address) as stub:
        every_queue = await stub.ListQueues(pb.ListQueuesRequest(page_size=500))
        every_node = await stub.ListNodes(pb.ListNodesRequest(page_size=500))
    assert len(every_queue.queues) > 1 and len(every_node.nodes) > 1  # more than one page of each
    assert [q.name for q in queues] == [q.name for q in every_queue.queues]
    assert sorted(n.id for n in nodes) == sorted(n.id for n in every_node.nodes)
    assert [j.spec.name for j in jobs] == ["paged-2", "paged-1"]  # newest first, one page each
