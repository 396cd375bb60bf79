"""The console in a real headless browser (Debian's chromium driven by Playwright; `make chromium`
installs both): every page loads without a console error, live values change while jobs arrive, and
a screenshot of each page is kept under the test artifacts directory (never in the repository)."""

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

PAGES = ("/", "/nodes", "/queues", "/jobs", "/network", "/charges")


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
    web: RunningConsole, scheduler: Fleet, artifacts: Path, record_property: Callable[[str, object], None]
) -> None:
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

            for path in PAGES:
                await page.goto(f"{web.url}{path.lstrip('/')}")
                await page.wait_for_selector("#live-status[data-state=live]")  # the stream is connected
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

            await page.goto(f"{web.url}jobs/{job.id}")
            await page.wait_for_selector("#job-timeline li:nth-child(2)")  # WatchJob's first event arrived
            assert "browser-live" in await page.inner_text("#job-summary")
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
            "network.png",
            "charges.png",
            "overview-live.png",
            "job.png",
        ]
    )
