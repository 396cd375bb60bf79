"""`suanli service drive NAME --gateway URL`: the trace replayed against a service through any gateway.

The service is looked up through serving (its id names the gateway's path; its spec's latency SLO is
what attainment is measured against); then `drive.Driver` replays the trace and the figures are printed
(and written as JSON with `--json`). Docs: docs/inference.md, "Driving the trace".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from dataclasses import asdict
from pathlib import Path

import aiohttp
import typer

from suanli.inference.attainment import DriveStats, DriveSummary, SloTarget, figure_rows
from suanli.inference.drive import DriveConfig, Driver, window
from suanli.inference.setup import load_trace
from suanli.serving.domain.trace import Trace, TraceError

PROGRESS_S = 5.0


def slo_of(spec_json: str, ttft_ms: float, tpot_ms: float) -> SloTarget:
    """The SLO to measure against: the options where given, else the spec's `target`."""
    try:
        target = json.loads(spec_json or "{}").get("target") or {}
    except (ValueError, AttributeError):
        target = {}
    ttft = ttft_ms or target.get("ttft_ms")
    tpot = tpot_ms or target.get("tpot_ms")
    if not ttft or not tpot:
        raise ValueError(
            "the service's spec has no latency SLO (target.ttft_ms and tpot_ms): give --ttft-ms and --tpot-ms"
        )
    return SloTarget(float(ttft) / 1000, float(tpot) / 1000)


def load_window(trace_path: Path | None, start_s: float, limit: int | None, speed: float) -> Trace:
    if not speed > 0:
        raise ValueError(f"--speed must be above 0 (got {speed})")
    if start_s < 0:
        raise ValueError(f"--start must be 0 or more seconds (got {start_s})")
    try:
        chosen = window(load_trace(trace_path), start_s, limit, speed)
    except (OSError, TraceError) as exc:
        raise ValueError(f"trace: {exc}") from None
    if not len(chosen):
        raise ValueError(f"no requests in the trace from {start_s:g}s on")
    return chosen


async def run_drive(trace: Trace, cfg: DriveConfig, target: SloTarget) -> DriveSummary:
    """Replay `trace`, printing a progress line every few seconds; Ctrl-C stops sending and reports."""
    stats = DriveStats(target)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    connector = aiohttp.TCPConnector(limit=cfg.max_in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:
        driver = Driver(session, cfg, stats)
        replay = asyncio.create_task(driver.replay(trace, stop))
        while not replay.done():
            await asyncio.wait({replay}, timeout=PROGRESS_S)
            s = stats.summary(driver.elapsed())
            typer.echo(
                f"{driver.elapsed():6.0f}s  sent {driver.sent}/{len(trace)}  ended {s.requests}  "
                f"in flight {driver.in_flight}  {s.recent_per_s:.1f}/s  failed {sum(s.failures.values())}",
                err=True,
            )
        await replay
        return stats.summary(driver.elapsed())


def report(summary: DriveSummary, json_path: Path | None) -> None:
    for name, text in figure_rows(summary):
        typer.echo(f"{name:15} {text}")
    if json_path is not None:
        json_path.write_text(
            json.dumps({**asdict(summary), "slo_attainment": summary.slo_attainment}, indent=2) + "\n",
            encoding="utf-8",
        )
