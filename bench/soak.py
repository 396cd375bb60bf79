"""Soak (issue 11): `suanli up --headless` at a steady load for a long run, sampled every 10 s.

Starts `suanli up --headless` with the demo's workload at a steady rate (its scripted milestones left
out, so nothing but the random mix arrives) and, once submission begins, samples every ``--interval``:
the resident memory of each of its processes (/proc/PID/status, pids from <home>/pids.json), each
consumer group's lag and each relay's outbox depth (`suanli_consumer_lag`, `suanli_outbox_pending` on
the /metrics ports `suanli up` prints), submit -> placement and scheduling-cycle p50/p99 over the
interval (the scheduler's histograms), the jobs submitted and final (its progress lines) and the
machine's load average. After ``--duration`` it stops submitting and `suanli up` drains for up to
``--drain`` s.

Pass criteria (suanli.platform.soak.criteria): each process's RSS at the end of the load within 10 %
of its RSS just after the warm-up; each group's lag in the second half of the steady load at most twice
the first half's maximum, or under 500 records; every submitted job final after the drain. The embedded
broker and PostgreSQL are reported, not judged (Tansu holds every record in memory by design). Exit code
1 names each failed criterion. Files in ``--out``: samples.csv, summary.json, soak.png, up.log and
suanli up's home (its logs/).

    .venv/bin/python bench/soak.py                                  # 30 min, 5 min warm-up
    .venv/bin/python bench/soak.py --duration 600 --warmup 120      # 10 min
    .venv/bin/python bench/soak.py --per-minute 24 --out out/soak   # the demo's own rate
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import yaml

from suanli.data import data_path
from suanli.platform.soak import report
from suanli.platform.soak.criteria import Criteria, Outcome, Sample, evaluate, failed
from suanli.platform.soak.sources import (
    Buckets,
    Progress,
    Scrape,
    cpu_seconds,
    interval,
    parse_metrics_ports,
    parse_progress,
    parse_scrape,
    quantile,
    vm_rss_mib,
)
from suanli.platform.supervisor import suanli_argv
from suanli.platform.up import read_pids
from suanli.telemetry.names import PLACEMENT_LATENCY, SCHEDULER_CYCLE

WORKLOAD = data_path("deploy/workloads/mixed.yaml")
RESULTS = Path(__file__).with_name("results") / "soak"


def steady_workload(source: Path, per_minute: float, pattern: str) -> dict[str, Any]:
    """The workload file without its script (transient milestones, one job cancelled on purpose) and at
    the soak's rate: the same tenants and mix arriving steadily."""
    document = yaml.safe_load(source.read_text(encoding="utf-8"))
    document.pop("script", None)
    document["arrivals"] = {"pattern": pattern, "per_minute": per_minute}
    return dict(document)


@dataclass
class Watch:
    """What `suanli up` printed so far: its /metrics URLs, its latest progress, when the load began."""

    urls: dict[str, str] | None = None
    progress: Progress | None = None
    load_began: float | None = None  # monotonic, at its first "submitting" line
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, stream: IO[str], log: IO[str]) -> None:
        for line in stream:
            log.write(line)
            log.flush()
            urls = parse_metrics_ports(line)
            progress = parse_progress(line)
            with self.lock:
                self.urls = urls or self.urls
                if progress is not None:
                    self.progress = progress
                    if progress.phase == "submitting" and self.load_began is None:
                        self.load_began = time.monotonic()


def scrape(url: str) -> Scrape | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return parse_scrape(answer.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return None  # the process is restarting or stopping: a gap in its series


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass
class Sampler:
    home: Path
    watch: Watch
    previous: dict[str, Buckets] = field(default_factory=dict)
    cpu_before: dict[int, tuple[float, float]] = field(default_factory=dict)  # pid -> (monotonic, CPU s)

    def processes(self) -> tuple[dict[str, float], dict[str, float]]:
        """Each recorded process's resident MiB and its CPU share (% of a core) since the last sample."""
        rss: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for process in read_pids(self.home):
            proc = Path(f"/proc/{process.pid}")
            with contextlib.suppress(OSError, IndexError, ValueError):
                mib = vm_rss_mib((proc / "status").read_text())
                used = cpu_seconds((proc / "stat").read_text(), TICKS_PER_S)
                if mib is None or not process.alive():
                    continue
                rss[process.name] = mib
                now = time.monotonic()
                before = self.cpu_before.get(process.pid)
                self.cpu_before[process.pid] = (now, used)
                if before is not None and now > before[0]:
                    cpu[process.name] = 100 * (used - before[1]) / (now - before[0])
        return rss, cpu

    def take(self) -> Sample:
        with self.watch.lock:
            urls = dict(self.watch.urls or {})
            progress = self.watch.progress
            began = self.watch.load_began or time.monotonic()
        t_s = time.monotonic() - began
        lag: dict[str, float] = {}
        outbox: dict[str, float] = {}
        histograms: dict[str, Buckets] = {}
        for name, url in sorted(urls.items()):
            page = scrape(url)
            if page is None:
                continue
            lag.update(page.lag)
            if page.outbox is not None:
                outbox[name] = page.outbox
            histograms.update(page.histograms)
        quantiles: dict[str, float | None] = {}
        for metric, key in ((PLACEMENT_LATENCY, "placement"), (SCHEDULER_CYCLE, "cycle")):
            now = histograms.get(metric)
            window = interval(now, self.previous.get(metric)) if now is not None else {}
            if now is not None:
                self.previous[metric] = now
            quantiles[f"{key}_p50_s"] = quantile(window, 0.5)
            quantiles[f"{key}_p99_s"] = quantile(window, 0.99)
        rss, cpu = self.processes()
        return Sample(
            t_s=round(t_s, 1),
            phase=progress.phase if progress else "starting",
            rss_mib=rss,
            cpu_pct=cpu,
            lag=lag,
            outbox=outbox,
            submitted=progress.submitted if progress else 0,
            final=progress.final if progress else 0,
            load1=os.getloadavg()[0],
            **quantiles,
        )


def outcome(home: Path, code: int | None) -> Outcome:
    """From `suanli up`'s summary.json; a run that wrote none ended before its jobs could be counted."""
    try:
        data = json.loads((home / "summary.json").read_text(encoding="utf-8"))
        return Outcome(data["submitted"], data["unfinished"], tuple(data.get("problems", ())))
    except (OSError, KeyError, TypeError, ValueError):
        return Outcome(0, 0, (f"suanli up wrote no summary (exit code {code})",))


def line(sample: Sample) -> str:
    rss_total = sum(sample.rss_mib.values())
    lag_max = max(sample.lag.values(), default=0)
    p99 = "-" if sample.placement_p99_s is None else f"{sample.placement_p99_s:.2f}s"
    return (
        f"{sample.t_s:7.0f}s {sample.phase:<10} RSS {rss_total:7.0f} MiB  lag max {lag_max:5.0f}  "
        f"outbox {sum(sample.outbox.values()):4.0f}  placement p99 {p99}  "
        f"jobs {sample.final}/{sample.submitted} final"
    )


def run(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = out / "home"
    workload = out / "workload.yaml"
    workload.write_text(yaml.safe_dump(steady_workload(args.workload, args.per_minute, args.pattern)))
    criteria = Criteria(
        warmup_s=args.warmup,
        memory_tolerance=args.memory_tolerance,
        lag_factor=args.lag_factor,
        lag_floor=args.lag_floor,
    )
    argv = suanli_argv(
        "up",
        "--headless",
        "--no-context",
        "--home",
        str(home),
        "--workload",
        str(workload),
        "--duration",
        str(args.duration),
        "--grace",
        str(args.drain),
    )
    started = datetime.now(UTC)
    print(f"soak: {' '.join(argv[2:])}; samples every {args.interval:g} s into {out}", flush=True)
    watch = Watch()
    samples: list[Sample] = []
    with (out / "up.log").open("w", encoding="utf-8") as log:
        up = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert up.stdout is not None
        reader = threading.Thread(target=watch.read, args=(up.stdout, log), daemon=True)
        reader.start()
        sampler = Sampler(home, watch)
        try:
            due: float | None = None
            while up.poll() is None:
                with watch.lock:
                    began = watch.load_began if watch.urls else None
                if began is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        up.wait(timeout=0.5)
                    continue
                due = began if due is None else due + args.interval
                with contextlib.suppress(subprocess.TimeoutExpired):
                    up.wait(timeout=max(0.0, due - time.monotonic()))
                if up.poll() is not None:
                    break
                samples.append(sampler.take())
                print(line(samples[-1]), flush=True)
                report.write_csv(out / "samples.csv", samples)
        finally:
            if up.poll() is None:  # interrupted: suanli up stops its platform on SIGTERM like on Ctrl-C
                up.send_signal(signal.SIGTERM)
            up.wait()
            reader.join(timeout=10)
    ended = outcome(home, up.returncode)
    verdicts = evaluate(samples, ended, criteria)
    title = (
        f"suanli up soak: {args.duration:g} s at {args.per_minute:g} jobs/min, warm-up {args.warmup:g} s, "
        f"{started:%Y-%m-%d %H:%M} UTC"
    )
    report.write_csv(out / "samples.csv", samples)
    report.write_summary(
        out / "summary.json",
        report.summary(
            samples,
            verdicts,
            criteria,
            {
                "command": " ".join(sys.argv),
                "started": started.isoformat(timespec="seconds"),
                "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {sys.version.split()[0]}",
                "duration_s": args.duration,
                "warmup_s": args.warmup,
                "drain_s": args.drain,
                "interval_s": args.interval,
                "per_minute": args.per_minute,
                "submitted": ended.submitted,
                "unfinished": ended.unfinished,
                "up_exit_code": up.returncode,
                "up_problems": list(ended.problems),
            },
        ),
    )
    report.plot(out / "soak.png", samples, criteria, title)
    for verdict in verdicts:
        mark = "INFO" if not verdict.judged else "PASS" if verdict.passed else "FAIL"
        print(f"{mark}  {verdict.criterion}: {verdict.detail}")
    failures = failed(verdicts)
    print(f"files: {out}/samples.csv, summary.json, soak.png, up.log")
    if failures:
        print("soak FAILED: " + ", ".join(v.criterion for v in failures))
        return 1
    print("soak passed")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of submission")
    parser.add_argument("--warmup", type=float, default=300.0, help="seconds of load before judging")
    parser.add_argument("--drain", type=float, default=180.0, help="seconds jobs may take to end after")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument(
        "--workload", type=Path, default=WORKLOAD, help="workload file (its script is dropped)"
    )
    parser.add_argument("--per-minute", type=float, default=12.0, help="job arrivals per minute")
    parser.add_argument("--pattern", choices=("poisson", "uniform"), default="poisson")
    parser.add_argument("--memory-tolerance", type=float, default=0.10, help="RSS change allowed (share)")
    parser.add_argument("--lag-factor", type=float, default=2.0, help="second half's lag max / first's")
    parser.add_argument("--lag-floor", type=float, default=500.0, help="records of lag always allowed")
    parser.add_argument("--out", type=Path, default=RESULTS, help="samples, summary, plot and logs")
    args = parser.parse_args()
    if args.warmup >= args.duration:
        parser.error("--warmup must be shorter than --duration")
    raise SystemExit(run(args))


if __name__ == "__main__":
    main()
