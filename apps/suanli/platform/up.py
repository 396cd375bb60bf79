"""`suanli up`: the whole platform on this machine, a seeded mixed workload, a live view, a summary.

One foreground process owns everything: it starts the Stack (broker, PostgreSQL, services, simulated
fleet, each child in its own session so a terminal Ctrl-C reaches only this process), submits the
workload over gRPC, watches through the public APIs, and on the way out stops every child and checks
that none is left. Docs: docs/demo.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import grpc
from rich.console import Console
from rich.live import Live

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.client import UNARY_TIMEOUT_S
from suanli.cli.config import write_context
from suanli.cli.render import FINAL_STATES
from suanli.infra.postgres import embedded_running, stop_embedded
from suanli.infra.process import pid_alive
from suanli.platform.dashboard import Status, dashboard, progress_line
from suanli.platform.demo_service import DEFAULT_SPEED, DEMO_SERVICE, GATEWAY_REGION, TENANT
from suanli.platform.inference_figures import InferenceSummary
from suanli.platform.observe import Observation, Observer
from suanli.platform.stack import DEFAULT_FLEET, DEFAULT_PRICEBOOK, DEFAULT_QUEUES, Stack, StackConfig
from suanli.platform.summary import (
    READY,
    Milestones,
    Summary,
    TimeAverage,
    charge_totals,
    gpu_figures,
    job_outcomes,
    milestones,
    network_placements,
    preemptions_seen,
    render_summary,
    started_use,
)
from suanli.platform.supervisor import group_members
from suanli.platform.workload import Arrival, DemoWorkload, arrivals, load_workload

if TYPE_CHECKING:
    from suanli.console.server import BackgroundConsole
    from suanli.platform.inference import LiveInference

MARKER = ".suanli-up"
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class UpError(RuntimeError):
    """`suanli up` cannot start (a home it must not touch, a run already going, a bad file)."""


@dataclass(frozen=True)
class UpOptions:
    home: Path
    workload: Path
    fleet: Path = DEFAULT_FLEET
    queues: Path = DEFAULT_QUEUES
    pricebook: Path = DEFAULT_PRICEBOOK
    policy: str | None = None  # None: the platform's default (StackConfig)
    duration_s: float | None = None  # None: submit until Ctrl-C
    grace_s: float = 120.0  # after --duration: how long in-flight jobs may take to finish
    headless: bool = False
    auth: bool = True  # tokens on (docs/security.md)
    tls: bool = True  # TLS on every gRPC server, a development CA (docs/security.md)
    # The user's CLI config (kubeconfig-like) that gets the context 'up', made current; None: only
    # <home>/config.yaml has it.
    user_config: Path | None = None
    poll_s: float = 1.0
    report_s: float = 5.0  # headless: seconds between progress lines
    fleet_timeout_s: float = 120.0
    # After the last job ended: how long charges must stay unchanged to count as complete.
    settle_s: float = 3.0
    settle_max_s: float = 30.0
    # The inference service driven by the Azure trace through the gateway (docs/demo.md, "Inference").
    inference: bool = True
    inference_speed: float = DEFAULT_SPEED


# --- the home directory --------------------------------------------------------------------------


def _start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot): tells a process from a reused pid."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Recorded:
    name: str
    pid: int
    pgid: int
    start: int | None

    @classmethod
    def of(cls, name: str, pid: int) -> Recorded:
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            pgid = -1
        return cls(name, pid, pgid, _start_time(pid))

    def alive(self) -> bool:
        return pid_alive(self.pid) and _start_time(self.pid) == self.start


def read_pids(home: Path) -> list[Recorded]:
    try:
        data = json.loads((home / "pids.json").read_text())
        return [Recorded(p["name"], p["pid"], p["pgid"], p.get("start")) for p in data["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def write_pids(home: Path, processes: list[Recorded]) -> None:
    data = {"processes": [asdict(p) for p in processes]}
    (home / "pids.json").write_text(json.dumps(data, indent=2) + "\n")


def prepare_home(home: Path) -> None:
    """Make `home` ready for a fresh run, refusing to touch a directory `suanli up` did not make."""
    if home.exists() and any(home.iterdir()) and not (home / MARKER).exists():
        raise UpError(f"{home} is not empty and was not made by `suanli up`; choose another --home")
    previous = read_pids(home)
    runner = [p for p in previous if p.name == "up" and p.alive()]
    if runner:
        raise UpError(f"`suanli up` is already running in {home} (pid {runner[0].pid})")
    # A previous run that was killed outright left its children behind (they have their own sessions).
    for process in previous:
        if process.alive() and process.pgid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pgid, signal.SIGKILL)
    if embedded_running(home / "pg"):
        stop_embedded(home / "pg")
    # The broker keeps nothing between runs, so a database from an earlier run would hold jobs and
    # placements no node knows about: each run starts from empty state (and fresh logs).
    for name in ("pg", "logs"):
        shutil.rmtree(home / name, ignore_errors=True)
    for name in ("pids.json", "summary.json"):
        (home / name).unlink(missing_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / MARKER).write_text("made by `suanli up`; its pg/ and logs/ are replaced on every run\n")


def _stack_processes(stack: Stack) -> list[Recorded]:
    processes = [Recorded.of("up", os.getpid())]
    if stack.broker is not None and stack.broker.pid is not None:
        processes.append(Recorded.of("tansu", stack.broker.pid))
    if stack.pg is not None and stack.pg.data_dir is not None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((stack.pg.data_dir / "postmaster.pid").read_text().split()[0])
            processes.append(Recorded.of("postgres", pid))
    processes += [Recorded.of(s.spec.name, s.pid) for s in stack.supervisor.services]
    return processes


def leftovers(processes: list[Recorded]) -> list[int]:
    """Pids still alive among the recorded processes and their process groups (ours excluded)."""
    own = os.getpid()
    alive = {p.pid for p in processes if p.pid != own and p.alive()}
    for process in processes:
        if process.pgid > 0 and process.pgid != os.getpgid(0):
            alive.update(group_members(process.pgid))
    return sorted(alive - {own})


# --- signals -------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# SIGTERM (`kill`, a CI timeout) and SIGHUP (the terminal closed) shut down as cleanly as Ctrl-C.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _terminate_like_ctrl_c() -> Iterator[None]:
    previous = {sig: signal.signal(sig, _interrupt) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _uninterruptible() -> Iterator[None]:
    """While stopping: a second Ctrl-C would abandon children half-stopped, so it waits."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, *_STOP_SIGNALS)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- the run -------------------------------------------------------------------------------------


@dataclass
class Run:
    options: UpOptions
    workload: DemoWorkload
    console: Console
    stack: Stack
    observer: Observer | None = None
    planned: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)
    interrupted: bool = False
    averages: TimeAverage = field(default_factory=TimeAverage)
    last: Observation = field(default_factory=lambda: Observation(at=0.0))
    started: float = field(default_factory=time.monotonic)
    submit_started: float = 0.0
    submit_ended: float = 0.0
    drain_ended: float = 0.0
    # job id -> (monotonic deadline, why): scripted jobs the demo cancels if they have not ended by then.
    cancels: dict[str, tuple[float, str]] = field(default_factory=dict)
    endpoints: str = ""  # the dashboard footer's addresses, once the platform listens
    inference: LiveInference | None = None
    inference_summary: InferenceSummary | None = None
    _unreachable_since: float | None = None

    # -- checks --

    def healthy(self) -> bool:
        return not self.problems

    def check_platform(self) -> None:
        for name, code in self.stack.supervisor.failed():
            self._problem(f"service {name} exited with code {code} (log: {self.logs}/{name}.log)")
        if self.stack.broker is not None and not self.stack.broker.alive():
            self._problem(f"the broker stopped (log: {self.logs}/tansu.log)")
        data_dir = self.stack.pg.data_dir if self.stack.pg is not None else None
        if data_dir is not None and not embedded_running(data_dir):
            self._problem(f"PostgreSQL stopped (log: {data_dir}/log)")

    def _problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    @property
    def logs(self) -> Path:
        return self.options.home / "logs"

    # -- start-up --

    def wait_for_fleet(self, expected: int) -> None:
        assert self.observer is not None
        deadline = time.monotonic() + self.options.fleet_timeout_s
        ready = 0
        while time.monotonic() < deadline:
            self.check_platform()
            if not self.healthy():
                return
            with contextlib.suppress(grpc.RpcError):
                ready = sum(1 for n in self.observer.nodes() if n.status == READY)
            if ready >= expected:
                return
            time.sleep(0.5)
        limit = self.options.fleet_timeout_s
        self._problem(f"only {ready} of {expected} nodes became Ready within {limit:.0f}s")

    # -- the loop --

    def submit(self, arrival: Arrival) -> bool:
        """Submit one job; False when it should be tried again (the scheduler was unreachable)."""
        assert self.observer is not None
        request = pb.SubmitJobRequest(spec=arrival.spec, request_id=arrival.request_id)
        try:
            job = self.observer.scheduler.SubmitJob(request, timeout=UNARY_TIMEOUT_S).job
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return False
            self.rejected += 1
            self._problem(f"the scheduler refused {arrival.spec.name}: {exc.code().name}: {exc.details()}")
            return True
        self.observer.submitted(job)
        if arrival.cancel_after_s is not None:
            why = f"the demo gives up on it after {arrival.cancel_after_s:g}s (docs/demo.md, 'The scenario')"
            self.cancels[job.id] = (time.monotonic() + arrival.cancel_after_s, why)
        return True

    def cancel_due(self) -> None:
        """Cancel the scripted jobs whose time is up and that have not ended."""
        assert self.observer is not None
        now = time.monotonic()
        for job_id, (deadline, why) in list(self.cancels.items()):
            if now < deadline:
                continue
            known = self.observer.jobs.get(job_id)
            if known is not None and known.state not in FINAL_STATES:
                try:
                    job = self.observer.scheduler.CancelJob(
                        pb.CancelJobRequest(job_id=job_id, reason=why), timeout=UNARY_TIMEOUT_S
                    )
                except grpc.RpcError as exc:
                    if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        continue  # tried again at the next poll
                    # Otherwise it ended meanwhile (FAILED_PRECONDITION): nothing left to cancel.
                else:
                    self.observer.submitted(job)
            del self.cancels[job_id]

    def poll(self, *, with_charges: bool = True) -> None:
        assert self.observer is not None
        now = time.monotonic()
        try:
            self.last = self.observer.observe(with_charges=with_charges)
            self._unreachable_since = None
        except grpc.RpcError as exc:
            # A busy 2-core machine can miss a deadline now and then; only a lasting outage is unhealthy.
            self._unreachable_since = self._unreachable_since or now
            if now - self._unreachable_since > 30:
                self._problem(f"the platform's APIs did not answer for 30s: {exc.code().name}")
            return
        if self.submit_started and not self.drain_ended:
            self.averages.add(self.last.at, gpu_figures(self.last.nodes, started_use(self.last.jobs)))
        if self.inference is not None:
            self.inference.poll()
        self.check_platform()

    def start_inference(self) -> None:
        """Create the demo's inference service and start replaying the trace through the gateway."""
        from suanli.platform.inference import LiveInference  # aiohttp and the trace: on use only

        live = LiveInference(
            self.stack.serving_addr,
            self.stack.scheduler_addr,
            self.stack.gateway_url,
            self.stack.admin_token,
            self.stack.ca,
            self.options.inference_speed,
        )
        live.start()
        self.inference = live
        if live.summary.problem:
            self._problem(live.summary.problem)

    def finish_inference(self) -> None:
        if self.inference is not None:
            self.inference_summary = self.inference.close()
            self.inference = None

    def status(self, phase: str) -> Status:
        assert self.observer is not None
        return Status(
            phase=phase,
            elapsed_s=time.monotonic() - self.started,
            submitted=len(self.observer.jobs),
            planned=self.planned,
            counts=self.observer.counts(),
            placements=self.observer.placed_total,
            utilisation_avg=self.averages.utilisation,
            milestones={
                "waited": len(self.observer.waits),
                "borrowing": len(self.observer.borrowing),
                "preemptions": len(self.observer.preemptions),
                "over quota": len(self.observer.quota_refusals()),
                "invoices": len(self.observer.invoices),
            },
            problems=tuple(self.problems),
            logs=str(self.logs),
            endpoints=self.endpoints,
            inference=self.inference.status() if self.inference is not None else None,
        )


def _announce_context(stack: Stack, options: UpOptions, console: Console) -> None:
    """Write the CLI's context 'up' where the user's CLI finds it, and say how to use it."""
    context = stack.context()
    if options.user_config is not None:
        write_context(options.user_config, context)
        where = (
            f"the CLI's context 'up' is now current in {options.user_config}: `suanli job list` works "
            "in any terminal (`suanli config use-context NAME` switches back)"
        )
    else:
        where = f"the CLI's context 'up': export SUANLI_CONFIG={stack.client_config}   then `suanli job list`"
    console.print(where, markup=False, soft_wrap=True)
    if stack.admin_token and stack.pg is not None:
        console.print(
            f"auth is on{', TLS is on' if stack.ca else ''}: the context carries a platform-admin token"
            f"{' and trusts the development CA' if stack.ca else ''}; more tokens: "
            f"SUANLI_PG_DSN='{stack.pg.dsn}' suanli auth token create "
            f"--home {options.home} -s alice -t acme -r tenant-member",
            markup=False,
            soft_wrap=True,
        )


def _endpoints(stack: Stack, web: BackgroundConsole | None) -> str:
    parts = [
        f"scheduler {stack.scheduler_addr}",
        f"billing {stack.billing_addr}",
        f"routing {stack.routing_addr}",
        f"serving {stack.serving_addr}",
        *([f"gateway {stack.gateway_url}"] if stack.gateway_url else []),
    ]
    if web is not None:
        parts.append(f"console {web.url}")
    return " · ".join(parts)


def _start_console(stack: Stack, console: Console) -> BackgroundConsole | None:
    """The web console on :8088, or a free port when that one is taken (docs/console.md)."""
    # On use: the console loads aiohttp, which `suanli up --help` should not wait for.
    from suanli.console.gateway import Targets
    from suanli.console.server import DEFAULT_LISTEN as CONSOLE_LISTEN
    from suanli.console.server import BackgroundConsole

    targets = Targets(stack.scheduler_addr, stack.billing_addr, stack.routing_addr, stack.serving_addr)
    web: BackgroundConsole | None = None
    for listen in (CONSOLE_LISTEN, "127.0.0.1:0"):
        try:
            web = BackgroundConsole(targets, stack.admin_token or "", stack.ca, listen)
            break
        except OSError:
            continue
    if web is None:
        console.print("web console: could not listen (see the log); the platform runs without it")
        return None
    how = (
        f"log in with the key {web.running.login_key}"
        if web.running.key_generated
        else f"log in with the platform-admin token: the `token:` of context 'up' in {stack.client_config}"
    )
    console.print(f"web console: {web.url} ({how})", markup=False, soft_wrap=True)
    return web


def run_up(options: UpOptions, console: Console) -> int:
    workload = load_workload(options.workload)
    expected_nodes = _fleet_size(options.fleet)
    prepare_home(options.home)
    config = StackConfig(
        home=options.home,
        fleet=options.fleet,
        queues=options.queues,
        pricebook=options.pricebook,
        broker_own_session=True,
        auth=options.auth,
        tls=options.tls,
        well_known_ports=True,
    )
    if options.policy:
        config = replace(config, policy=options.policy)
    stack = Stack(config)
    run = Run(options, workload, console, stack)
    processes: list[Recorded] = []
    web: BackgroundConsole | None = None
    with _terminate_like_ctrl_c():
        try:
            console.print(f"starting the platform in {options.home} (logs: {run.logs}/*.log)")
            try:
                stack.start()
                if options.inference:
                    stack.start_gateway(GATEWAY_REGION)
            finally:
                processes = _stack_processes(stack)
                write_pids(options.home, processes)
            run.observer = Observer(
                stack.scheduler_addr,
                stack.billing_addr,
                workload.tenant_names,
                stack.routing_addr,
                token=stack.admin_token,
                ca_pem=stack.ca,
            )
            _announce_context(stack, options, console)
            console.print(
                f"scheduler {stack.scheduler_addr}, billing {stack.billing_addr}, "
                f"routing {stack.routing_addr}, serving {stack.serving_addr}; "
                f"waiting for {expected_nodes} nodes of {options.fleet.name} to be Ready"
            )
            metrics = ", ".join(f"{name} :{port}" for name, port in sorted(stack.metrics_ports.items()))
            console.print(f"/metrics on 127.0.0.1: {metrics}")
            if stack.spans is not None:
                console.print(
                    f"traces: {stack.spans.query_url} (Jaeger query API; `suanli job trace JOB`), "
                    f"OTLP/gRPC in at {stack.spans.otlp_endpoint}",
                    markup=False,
                    soft_wrap=True,
                )
            web = _start_console(stack, console)
            run.endpoints = _endpoints(stack, web)
            run.wait_for_fleet(expected_nodes)
            if run.healthy() and options.inference:
                run.start_inference()
                console.print(
                    f"inference: service {TENANT}/{DEMO_SERVICE['name']} ({DEMO_SERVICE['model']}) gets the "
                    f"Azure conversation trace at {options.inference_speed:g}x through the gateway "
                    f"{stack.gateway_url}; replay it yourself: suanli service drive {DEMO_SERVICE['name']} "
                    f"-t {TENANT} --gateway {stack.gateway_url}",
                    markup=False,
                    soft_wrap=True,
                )
            if run.healthy():
                _drive(run)
        except KeyboardInterrupt:
            run.interrupted = True
            run._problem("interrupted (Ctrl-C, SIGTERM or SIGHUP) before every job ended")
        except Exception as exc:  # a start failure: report it like any other problem, after cleaning up
            run._problem(f"{type(exc).__name__}: {exc}")
        finally:
            with _uninterruptible():
                # Nothing may keep the children from being stopped: not a closed channel, not a
                # terminal that went away (SIGHUP) and now fails every write.
                with contextlib.suppress(Exception):
                    run.finish_inference()  # before the stack stops: it asks the scheduler at the end
                with contextlib.suppress(Exception):
                    if web is not None:
                        web.close()
                    if run.observer is not None:
                        run.observer.close()
                    console.print("stopping the platform…")
                stack.stop()
    left = leftovers(processes)
    summary = _summarise(run, left)
    summary.write(options.home / "summary.json")
    with contextlib.suppress(OSError):
        console.print(render_summary(summary))
        console.print(f"summary: {options.home / 'summary.json'}  logs: {run.logs}/*.log")
    return summary.exit_code


def _fleet_size(fleet: Path) -> int:
    from suanli.sensing.adapters.fleet_file import load_fleet  # the same expansion the agent uses

    return len(load_fleet(fleet).nodes)


def _drive(run: Run) -> None:
    """Submit on schedule, poll, show; then drain and let charges settle."""
    if run.options.headless:
        _loop(run, HeadlessReport(run))
        return
    with Live(console=run.console, screen=True, auto_refresh=False, redirect_stderr=False) as live:

        def show(phase: str) -> None:
            assert run.observer is not None
            jobs = list(run.observer.jobs.values())
            preemptions = preemptions_seen(run.observer.jobs, run.observer.preemptions.values())
            view = dashboard(run.status(phase), run.last, jobs, run.observer.decisions, preemptions)
            live.update(view, refresh=True)

        _loop(run, show)


@dataclass
class HeadlessReport:
    """A progress line every `report_s` and whenever the phase changes."""

    run: Run
    _at: float = float("-inf")
    _phase: str = ""

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        if now - self._at >= self.run.options.report_s or phase != self._phase:
            self._at, self._phase = now, phase
            line = progress_line(self.run.status(phase), self.run.last)
            self.run.console.print(line, markup=False, highlight=False, soft_wrap=True)


# One loop over the run's phases (submitting, draining, settling): every branch reads and moves the same
# local state, so splitting it would only pass that state around.
def _loop(run: Run, show: Callable[[str], None]) -> None:  # noqa: C901
    options = run.options
    assert run.observer is not None
    run_id = uuid.uuid4().hex[:8]
    upcoming = arrivals(run.workload, run_id)
    duration = options.duration_s
    run.planned = _planned(run.workload, duration, run_id)
    run.submit_started = time.monotonic()
    pending_arrival: Arrival | None = next(upcoming)
    next_poll = run.submit_started
    phase = "submitting"
    settle_from: float | None = None
    stable_since: float | None = None
    last_charges: dict[str, str] = {}
    while True:
        now = time.monotonic()
        offset = now - run.submit_started
        if phase == "submitting":
            if duration is not None and offset >= duration:
                phase, run.submit_ended = "draining", now
                if run.inference is not None:
                    run.inference.stop_sending()
            while phase == "submitting" and pending_arrival is not None and pending_arrival.at_s <= offset:
                if not run.submit(pending_arrival):
                    break
                pending_arrival = next(upcoming)
        if now >= next_poll:
            next_poll = now + options.poll_s
            run.cancel_due()
            run.poll()
            if phase == "draining":
                if not run.observer.unfinished():
                    phase, run.drain_ended, settle_from = "settling", now, now
                elif now - run.submit_ended > options.grace_s:
                    run.drain_ended = now
                    run._problem(
                        f"{len(run.observer.unfinished())} job(s) not final {options.grace_s:.0f}s after "
                        "submission stopped"
                    )
                    show(phase)
                    return
            elif phase == "settling":
                assert settle_from is not None
                charges = {t: str(c.total) for t, c in run.last.charges.items()}
                if charges != last_charges:
                    last_charges, stable_since = charges, now
                if (stable_since is not None and now - stable_since >= options.settle_s) or (
                    now - settle_from >= options.settle_max_s
                ):
                    show(phase)
                    return
            show(phase)
            if not run.healthy():
                run.drain_ended = run.drain_ended or now
                run.submit_ended = run.submit_ended or now
                return
        wake = next_poll
        if phase == "submitting" and pending_arrival is not None:
            wake = min(wake, run.submit_started + pending_arrival.at_s)
        time.sleep(max(0.01, wake - time.monotonic()))


def _planned(workload: DemoWorkload, duration_s: float | None, run_id: str) -> int:
    if duration_s is None:
        return 0
    count = 0
    for arrival in arrivals(workload, run_id):
        if arrival.at_s >= duration_s:
            return count
        count += 1
    return count


def _summarise(run: Run, left: list[int]) -> Summary:
    options = run.options
    jobs = list(run.observer.jobs.values()) if run.observer else []
    outcomes = job_outcomes(jobs)
    charges, counts, currency = charge_totals(run.last.charges)
    problems = list(run.problems)
    if left:
        problems.append(f"processes left behind: {left}")
    all_final = outcomes["unfinished"] == 0
    if not all_final and not any("not final" in p for p in problems):
        problems.append(f"{outcomes['unfinished']} job(s) did not reach a final state")
    exit_code = 0
    if problems:
        exit_code = EXIT_INTERRUPTED if run.interrupted else EXIT_FAILED
    now = time.monotonic()
    submit_ended = run.submit_ended or now
    figures = gpu_figures(run.last.nodes, started_use(run.last.jobs))
    return Summary(
        submitted=len(jobs),
        succeeded=outcomes["succeeded"],
        failed=outcomes["failed"],
        cancelled=outcomes["cancelled"],
        unfinished=outcomes["unfinished"],
        rejected=run.rejected,
        all_final=all_final,
        gpu_utilisation_avg=round(run.averages.utilisation, 4),
        gpu_utilisation_peak=round(run.averages.peak_utilisation, 4),
        fragmentation_avg=round(run.averages.fragmentation, 4),
        gpus_total=figures.total / 1000,
        placements=run.observer.placed_total if run.observer else 0,
        charges=charges,
        charge_counts=counts,
        currency=currency,
        healthy=not run.problems,
        problems=problems,
        leftover_processes=left,
        wall_s=round(now - run.started, 1),
        submit_s=round(submit_ended - run.submit_started, 1) if run.submit_started else 0.0,
        drain_s=round((run.drain_ended or now) - submit_ended, 1) if run.submit_started else 0.0,
        exit_code=exit_code,
        home=str(options.home),
        fleet=str(options.fleet),
        workload=str(options.workload),
        policy=run.stack.config.policy,
        unfinished_jobs=[j.id for j in jobs if j.state not in FINAL_STATES][:50],
        network_placements=network_placements(jobs),
        milestones=_milestones(run),
        inference=run.inference_summary,
    )


def _milestones(run: Run) -> Milestones:
    observer = run.observer
    if observer is None:
        return Milestones()
    return milestones(
        observer.jobs,
        observer.waits.values(),
        observer.quota_refusals(),
        observer.preemptions.values(),
        observer.borrowing.values(),
        observer.invoices.values(),
        run.averages,
    )
