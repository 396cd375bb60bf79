"""The console in a real headless browser (Debian's chromium driven by Playwright; `make chromium`
installs both), in front of the scheduler, billing, routing and serving: every page loads without a
console error and shows the services' data, live values change while jobs arrive, the job page holds
the job's whole history, and a screenshot of each page is kept under the test artifacts directory
(never in the repository; .ci/run keeps them in .ci/artifacts/console)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from scheduling.helpers import until

from suanli.console.server import RunningConsole

from .consolekit import Fleet

pytestmark = pytest.mark.timeout(180)

CHROMIUM = os.environ.get("SUANLI_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if importlib.util.find_spec("playwright") is None:
    pytest.skip("playwright is not installed (make chromium)", allow_module_level=True)
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no chromium at {CHROMIUM} (make chromium; or set SUANLI_CHROMIUM)", allow_module_level=True)

from playwright.async_api import ConsoleMessage, Page, async_playwright  # noqa: E402

# path -> (a selector of what the page shows from its service once the stream delivered it, the texts
# it holds): the heat map, the nodes, the queues, the jobs, the inference service and its placed
# replica, the measured path, the hour of H200 billed to acme.
PAGES = {
    "/": ("#heatmap tfoot", ["/10"]),
    "/nodes": ("#nodes td.devices", []),
    "/queues": ('#queues tr[data-queue="acme/vision"]', ["acme/vision"]),
    "/jobs": ("#jobs tbody", ["billed", "chat-"]),
    "/services": ('#services tr[data-service="acme/chat"]', ["llama-2-7b", "active", "placed"]),
    "/network": ("#network td.link:not(.none)", [" ms", "loss"]),
    "/charges": ('#charges tr[data-tenant="acme"]', ["h200", "cn-east", "CNY"]),
}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SUANLI_TEST_ARTIFACTS/console when set (CI keeps that directory), else a pytest temporary one."""
    given = os.environ.get("SUANLI_TEST_ARTIFACTS")
    path = Path(given) / "console" if given else tmp_path_factory.mktemp("console-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def collect_errors(page: Page) -> list[str]:
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"console: {message.text} ({message.location})")

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    return errors


async def text_changes(page: Page, selector: str, before: str, what: str) -> str:
    async def changed() -> str | None:
        now = await page.inner_text(selector)
        return now if now != before else None

    return await until(changed, 30.0, what)


def shot(artifacts: Path, name: str) -> Callable[[Page], object]:
    return lambda page: page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


async def test_pages_in_a_browser(
    full_web: tuple[RunningConsole, Fleet], artifacts: Path, record_property: Callable[[str, object], None]
) -> None:
    web, scheduler = full_web
    record_property("screenshots", str(artifacts))
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            errors = collect_errors(page)
            await page.goto(f"{web.url}jobs")
            assert page.url.startswith(f"{web.url}login")  # no session: the login form first
            await shot(artifacts, "login")(page)
            await page.fill("#token", web.login_key)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{web.url}jobs")

            for path, (shows, texts) in PAGES.items():
                await page.goto(f"{web.url}{path.lstrip('/')}")
                await page.wait_for_selector("#live-status[data-state=live]")  # the stream is connected
                await page.wait_for_selector(shows)
                assert not await page.query_selector("main .error"), await page.inner_text("main")
                shown = await page.inner_text(shows)
                assert all(text in shown for text in texts), (path, shown)
                await shot(artifacts, path.strip("/") or "overview")(page)
            assert not errors, errors

            # Live: the overview's job counts and heat map change as jobs arrive and are placed, without
            # a reload.
            await page.goto(web.url)
            await page.wait_for_selector("#live-status[data-state=live]")
            counts, heat = await page.inner_text("#jobs"), await page.inner_text("#heatmap")
            job = await scheduler.submit("browser-live", gpus=2)
            await text_changes(page, "#jobs", counts, "the job counts to change")
            await text_changes(page, "#heatmap", heat, "the heat map to show the placement")
            await shot(artifacts, "overview-live")(page)

            # The job's whole history (DescribeJob), though the console never showed the job before.
            await page.goto(f"{web.url}jobs/{job.id}")
            await page.wait_for_selector('#job-timeline li[data-event="TaskPlaced"]')
            assert "JobSubmitted" in await page.inner_text("#job-timeline li:first-child")
            assert "browser-live" in await page.inner_text("#job-summary")
            assert await page.query_selector("#job-attempts tbody tr")
            await shot(artifacts, "job")(page)
            assert not errors, errors
        finally:
            await browser.close()
    assert sorted(p.name for p in artifacts.glob("*.png")) == sorted(
        [
            "login.png",
            "overview.png",
            "nodes.png",
            "queues.png",
            "jobs.png",
            "services.png",
            "network.png",
            "charges.png",
            "overview-live.png",
            "job.png",
        ]
    )
