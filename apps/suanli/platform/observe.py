"""What `suanli up` sees of the running platform, through the same gRPC APIs as any client.

Jobs are followed cheaply: each poll lists only pending and running jobs, and a submitted job that has
left both lists is fetched once to learn how it ended. Placements are noticed as task attempts gain a
node, which gives the feed of scheduling decisions, each with where it went and why: the region, the RTT
from there to the job's data region and the expected price per hour, as the scheduler recorded them. The
network matrix is the routing service's `GetNetwork`; routing being away blanks only that panel.

Along the way it notes the scenario's milestones (docs/demo.md, "The scenario"): every job seen waiting
and why, quota refusals, preemptions (victim and preemptor, from the preemptor's WAITING_FOR_PREEMPTION
reason or the victim's "preempted by" task reason while it is under way, and from the recorded
TaskPreempted of every job that restarted, so a poll that missed the moment misses nothing), the most
each queue borrowed from its cohort, and the invoices billing has issued.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

import grpc

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc
from suanli.cli import paging
from suanli.cli.client import UNARY_TIMEOUT_S
from suanli.cli.config import bearer_channel
from suanli.cli.queues import all_queues
from suanli.cli.render import FINAL_STATES, gpu_slots

PAGE_SIZE = 500
QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
WAITING_FOR_PREEMPTION = "WAITING_FOR_PREEMPTION"
PREEMPTED_BY = "preempted by "  # a stopping victim's task reason (the scheduler's TaskPreempted)
RECENT_DECISIONS = 12


@dataclass(frozen=True, slots=True)
class Decision:
    at: float  # monotonic, when it was noticed
    job_id: str
    job_name: str
    task_id: str
    node_id: str
    gpus: str  # device slots as in `suanli job get`: "0,1" or "2@0.3"
    region: str = ""
    data_region: str = ""  # the job's; "" when it named none
    rtt_ms: float | None = None  # from the region to the data region, as placement knew it
    price_per_hour: float | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """A job seen pending with a reason: the first reason, as the scheduler gave it."""

    job_id: str
    job_name: str
    queue: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Preemption:
    victim_id: str
    preemptor_id: str
    at: float  # monotonic, when it was noticed


@dataclass(frozen=True, slots=True)
class Borrowing:
    """The most a queue held of a flavour beyond its guarantee (borrowed from its cohort)."""

    queue: str
    cohort: str
    flavour: str
    guaranteed: int
    borrowed: int


@dataclass(frozen=True, slots=True)
class IssuedInvoice:
    invoice_id: str
    tenant: str
    period: str
    currency: str
    total: Decimal
    lines: int


@dataclass(frozen=True, slots=True)
class TenantCharges:
    total: Decimal
    charges: int
    currency: str


@dataclass
class Observation:
    at: float
    nodes: list[pb.Node] = field(default_factory=list)
    queues: list[pb.Queue] = field(default_factory=list)
    charges: dict[str, TenantCharges] = field(default_factory=dict)
    jobs: list[pb.Job] = field(default_factory=list)  # the live jobs known at `at`
    # The region pairs of routing's view; None when routing did not answer this time.
    network: list[rpb.Link] | None = None


class Observer:
    """Polls the scheduler, billing and routing; keeps the last known state of every job it was told about."""

    def __init__(
        self,
        scheduler_addr: str,
        billing_addr: str,
        tenants: Iterable[str],
        routing_addr: str = "",
        token: str = "",
        ca_pem: bytes | None = None,
    ) -> None:
        # `token`: the platform admin's, when the stack runs with authentication; `ca_pem`: the CA of the
        # servers' certificates when they serve TLS (docs/security.md).
        self._scheduler_channel = bearer_channel(scheduler_addr, token, ca_pem)
        self._billing_channel = bearer_channel(billing_addr, token, ca_pem)
        self._routing_channel = bearer_channel(routing_addr, token, ca_pem) if routing_addr else None
        self.scheduler = scheduler_pb2_grpc.SchedulerStub(self._scheduler_channel)
        self.billing = billing_pb2_grpc.BillingStub(self._billing_channel)
        self.routing = routing_pb2_grpc.RoutingStub(self._routing_channel) if self._routing_channel else None
        self.tenants = tuple(tenants)
        self.jobs: dict[str, pb.Job] = {}
        self.decisions: deque[Decision] = deque(maxlen=RECENT_DECISIONS)
        self.placed_total = 0
        self._seen_attempts: set[tuple[str, int, str]] = set()
        # tenant -> billing period label -> its charges as last read (labels sort in time order)
        self._period_charges: dict[str, dict[str, TenantCharges]] = {}
        # The milestones, in the order they were noticed.
        self.waits: dict[str, Wait] = {}  # job id -> its first reason
        self.quota_waits: dict[str, Wait] = {}  # job id -> its first QUOTA_EXCEEDED
        self.placed_jobs: set[str] = set()  # jobs that had a task placed at least once
        self.preemptions: dict[tuple[str, str], Preemption] = {}  # (victim, preemptor)
        self.borrowing: dict[tuple[str, str], Borrowing] = {}  # (queue, flavour) -> its peak
        self.invoices: dict[tuple[str, str], IssuedInvoice] = {}  # (tenant, period)

    def close(self) -> None:
        self._scheduler_channel.close()
        self._billing_channel.close()
        if self._routing_channel is not None:
            self._routing_channel.close()

    # --- jobs ---------------------------------------------------------------------------------------

    def submitted(self, job: pb.Job) -> None:
        self.jobs[job.id] = job

    def _list(self, state: pb.JobState) -> list[pb.Job]:
        def fetch(size: int, token: str) -> tuple[list[pb.Job], str]:
            answer = self.scheduler.ListJobs(
                pb.ListJobsRequest(state=state, page_size=size, page_token=token), timeout=UNARY_TIMEOUT_S
            )
            return list(answer.jobs), answer.next_page_token

        return paging.collect(fetch, page_size=PAGE_SIZE)[0]

    def refresh_jobs(self, now: float) -> None:
        listed = (pb.JOB_STATE_PENDING, pb.JOB_STATE_RUNNING)
        active = {j.id: j for state in listed for j in self._list(state)}
        for job_id, known in list(self.jobs.items()):
            if known.state in FINAL_STATES:
                continue
            # Gone from both lists: it ended (or moved between the two calls); ask once for its state.
            job = active.get(job_id) or self.scheduler.GetJob(
                pb.GetJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S
            )
            restarted = job.restarts > known.restarts
            self.jobs[job_id] = job
            self._note_placements(job, now)
            self._note_waits(job, now)
            if restarted:
                self._note_preemptions(job_id, now)

    def _note_waits(self, job: pb.Job, now: float) -> None:
        reason = job.pending_reason
        if job.state == pb.JOB_STATE_PENDING and reason.code:
            wait = Wait(job.id, job.spec.name, job.spec.queue, reason.code, reason.message)
            self.waits.setdefault(job.id, wait)
            if reason.code == QUOTA_EXCEEDED:
                self.quota_waits.setdefault(job.id, wait)
            if reason.code == WAITING_FOR_PREEMPTION:
                for victim in _victims(reason.details.get("victims", "")):
                    self.preemptions.setdefault((victim, job.id), Preemption(victim, job.id, now))
        for task in job.tasks:
            # While its tasks stop, a victim's reason names the job it makes room for.
            if task.reason.startswith(PREEMPTED_BY):
                preemptor = task.reason.removeprefix(PREEMPTED_BY).strip()
                self.preemptions.setdefault((job.id, preemptor), Preemption(job.id, preemptor, now))

    def _note_preemptions(self, job_id: str, now: float) -> None:
        """A job that restarted: its history says whether a preemption did it, and by which job.

        The reasons above show a preemption only while it is under way (a second or two); a poll that
        misses that window would miss it, the recorded TaskPreempted never is.
        """
        described = self.scheduler.DescribeJob(pb.DescribeJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S)
        for event in described.events:
            if event.type == "TaskPreempted" and event.by:
                self.preemptions.setdefault((job_id, event.by), Preemption(job_id, event.by, now))

    def _note_placements(self, job: pb.Job, now: float) -> None:
        for task in job.tasks:
            key = (task.task_id, task.attempt, task.node_id)
            if not task.node_id or key in self._seen_attempts:
                continue
            self._seen_attempts.add(key)
            self.placed_jobs.add(job.id)
            self.placed_total += 1
            self.decisions.appendleft(
                Decision(
                    now,
                    job.id,
                    job.spec.name,
                    task.task_id,
                    task.node_id,
                    gpu_slots(task),
                    region=task.region,
                    data_region=job.spec.data_region,
                    rtt_ms=task.rtt_ms if task.HasField("rtt_ms") else None,
                    price_per_hour=task.price_per_hour if task.HasField("price_per_hour") else None,
                )
            )

    def quota_refusals(self) -> list[Wait]:
        """Jobs held by QUOTA_EXCEEDED that never ran: refused, as opposed to waiting their turn."""
        return [w for job_id, w in self.quota_waits.items() if job_id not in self.placed_jobs]

    def unfinished(self) -> list[pb.Job]:
        return [j for j in self.jobs.values() if j.state not in FINAL_STATES]

    def counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for job in self.jobs.values():
            counts[job.state] = counts.get(job.state, 0) + 1
        return counts

    # --- capacity, queues, charges ------------------------------------------------------------------

    def nodes(self) -> list[pb.Node]:
        def fetch(size: int, token: str) -> tuple[list[pb.Node], str]:
            answer = self.scheduler.ListNodes(
                pb.ListNodesRequest(page_size=size, page_token=token), timeout=UNARY_TIMEOUT_S
            )
            return list(answer.nodes), answer.next_page_token

        return paging.collect(fetch, page_size=PAGE_SIZE)[0]

    def queues(self) -> list[pb.Queue]:
        queues = all_queues(self.scheduler)
        for queue in queues:
            for r in queue.resources:
                known = self.borrowing.get((queue.name, r.flavour))
                if r.borrowed > 0 and (known is None or r.borrowed > known.borrowed):
                    self.borrowing[(queue.name, r.flavour)] = Borrowing(
                        queue.name, queue.cohort, r.flavour, r.guaranteed, r.borrowed
                    )
        return queues

    def check_invoices(self) -> None:
        """The latest invoice each tenant has been issued (NOT_FOUND until billing closed a period)."""
        for tenant in self.tenants:
            request = bpb.GetInvoiceRequest(tenant=tenant)
            try:
                invoice = self.billing.GetInvoice(request, timeout=UNARY_TIMEOUT_S)
            except grpc.RpcError as exc:
                if exc.code() is not grpc.StatusCode.NOT_FOUND:
                    raise
                continue
            self.invoices[(tenant, invoice.period.label)] = IssuedInvoice(
                invoice.invoice_id,
                tenant,
                invoice.period.label,
                invoice.currency,
                Decimal(invoice.total or "0"),
                len(invoice.lines),
            )

    def charges(self) -> dict[str, TenantCharges]:
        """Each tenant's charges in the billing periods of the run so far.

        Periods may be shorter than the run (the demo's are a minute, so it closes some): each poll asks
        for the current period and re-reads the one before it, where late usage still lands within the
        close grace; earlier periods keep the totals last read.
        """
        result = {}
        for tenant in self.tenants:
            periods = self._period_charges.setdefault(tenant, {})
            current = self._usage(tenant, "")
            if current is not None:
                periods[current[0]] = current[1]
                earlier = sorted(label for label in periods if label != current[0])
                if earlier and (previous := self._usage(tenant, earlier[-1])) is not None:
                    periods[previous[0]] = previous[1]
            result[tenant] = TenantCharges(
                sum((c.total for c in periods.values()), Decimal(0)),
                sum(c.charges for c in periods.values()),
                next((c.currency for c in periods.values() if c.currency), ""),
            )
        return result

    def _usage(self, tenant: str, period: str) -> tuple[str, TenantCharges] | None:
        """(period label, charges) of one period; None while billing has seen no job of the tenant."""
        request = bpb.GetUsageRequest(tenant=tenant, period=period)
        try:
            usage = self.billing.GetUsage(request, timeout=UNARY_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.NOT_FOUND:
                raise
            return None
        charges = TenantCharges(
            Decimal(usage.total or "0"), sum(r.charges for r in usage.rows), usage.currency
        )
        return usage.period.label, charges

    def _charges_and_invoices(self) -> dict[str, TenantCharges]:
        charges = self.charges()
        self.check_invoices()
        return charges

    def network(self) -> list[rpb.Link] | None:
        if self.routing is None:
            return None
        try:
            matrix = self.routing.GetNetwork(rpb.GetNetworkRequest(), timeout=UNARY_TIMEOUT_S)
        except grpc.RpcError:
            # Routing restarting or away: the scheduler keeps placing from its last view, and so the
            # run is not unhealthy for it; the panel says so.
            return None
        return list(matrix.region_links)

    def observe(self, *, with_charges: bool = True) -> Observation:
        now = time.monotonic()
        self.refresh_jobs(now)
        return Observation(
            at=now,
            nodes=self.nodes(),
            queues=self.queues(),
            charges=self._charges_and_invoices() if with_charges else {},
            jobs=[j for j in self.jobs.values() if j.state not in FINAL_STATES],
            network=self.network(),
        )


def _victims(text: str) -> list[str]:
    """The job ids of a WAITING_FOR_PREEMPTION reason's `victims` detail (a JSON list)."""
    try:
        victims = json.loads(text)
    except ValueError:
        return []
    return [str(v) for v in victims] if isinstance(victims, list) else []
