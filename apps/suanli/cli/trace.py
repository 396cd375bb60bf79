"""`suanli job trace JOB`: a job's timeline across the services, read from a trace store.

The spans come from a Jaeger query API: Jaeger's own (the compose stack's, :16686) or the trace store
`suanli up` runs (`suanli.telemetry.spanstore`, which answers the same API). The URL is ``--traces``,
else ``SUANLI_TRACES_URL``, else the config context's ``traces`` entry, else ``http://127.0.0.1:16686``.

A job's spans are the traces holding a span tagged ``job_id=<id>`` (its SubmitJob, its cycle decision,
the agent's start, its charges), searched in every service the store knows (Jaeger needs a service per
search). The timeline lists each span by its start offset from the submission; "where the time went"
splits the job's path into phases between landmark spans (queue, placement, delivery, ...).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from suanli.cli import config
from suanli.cli.client import EXIT_REFUSED, EXIT_UNREACHABLE, Failure, fail
from suanli.cli.output import Output, Rows, emit_rows, rows_table, show, stdout

TRACES_ENV = "SUANLI_TRACES_URL"
BUILTIN_TRACES = "http://127.0.0.1:16686"
SUBMIT = "suanli.scheduler.v1.Scheduler/SubmitJob"
TIMEOUT_S = 10.0
LOOKBACK_US = 30 * 24 * 3600 * 1_000_000  # how far back a job's traces are searched
# The attributes that say what a span was about, as the timeline's detail.
DETAIL_TAGS = ("suanli.event_name", "messaging.destination.name", "messaging.destination.names", "node_id")

TracesOption = Annotated[
    str,
    typer.Option(
        "--traces",
        envvar=TRACES_ENV,
        metavar="URL",
        help=f"Jaeger query API to read spans from (env {TRACES_ENV}; default: the config context's "
        f"`traces`, which `suanli up` writes, else {BUILTIN_TRACES}: Jaeger in the compose stack).",
        show_default=False,
    ),
]


@dataclass(frozen=True, slots=True)
class Hop:
    """One span of the job's timeline."""

    trace_id: str
    span_id: str
    parent_id: str
    service: str
    name: str
    kind: str
    start_us: int
    duration_us: int
    tags: dict[str, Any]

    @property
    def end_us(self) -> int:
        return self.start_us + self.duration_us

    @property
    def detail(self) -> str:
        """What the span was about, in a few words (the event, topic or node)."""
        tags = self.tags
        parts = [_plain(tags[k]) for k in DETAIL_TAGS if tags.get(k) not in (None, "")]
        if tags.get("error"):
            parts.append("ERROR")
        return " ".join(dict.fromkeys(parts))


def _plain(value: Any) -> str:
    """A tag's value as text; an array attribute (Jaeger sends it as JSON text) as its items."""
    if isinstance(value, str) and value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            return value
        return " ".join(str(i) for i in items) if isinstance(items, list) else value
    return str(value)


def traces_url(given: str) -> str:
    """The query API's base URL: the flag or its variable, else the context's, else the default."""
    return config.server("traces", given, BUILTIN_TRACES).rstrip("/")


def _get(base: str, path: str, params: dict[str, str] | None = None) -> Any:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise fail(Failure(f"trace store at {base} answered {exc.code} for {path}", EXIT_REFUSED)) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise fail(
            Failure(
                f"cannot reach the trace store at {base} ({reason}); pass --traces or set {TRACES_ENV}",
                EXIT_UNREACHABLE,
            )
        ) from None


def _hops(trace: dict[str, Any]) -> list[Hop]:
    processes = trace.get("processes") or {}
    out = []
    for span in trace.get("spans") or []:
        parent = next((r["spanID"] for r in span.get("references") or [] if r["refType"] == "CHILD_OF"), "")
        tags = {t["key"]: t.get("value") for t in span.get("tags") or []}
        out.append(
            Hop(
                trace_id=span["traceID"],
                span_id=span["spanID"],
                parent_id=parent,
                service=(processes.get(span.get("processID")) or {}).get("serviceName", ""),
                name=span["operationName"],
                kind=str(tags.pop("span.kind", "")),
                start_us=int(span["startTime"]),
                duration_us=int(span["duration"]),
                tags=tags,
            )
        )
    return out


def job_hops(base: str, job_id: str) -> list[Hop]:
    """Every span of the traces holding a span tagged with the job, by start time."""
    services = _get(base, "/api/services").get("data") or []
    # A search window wide enough for any job the store still holds (the trace store ignores it).
    end_us = time.time_ns() // 1000
    window = {"start": str(end_us - LOOKBACK_US), "end": str(end_us), "limit": "20"}
    tags = json.dumps({"job_id": job_id})
    found: dict[str, Hop] = {}
    for service in services:
        answer = _get(base, "/api/traces", {"service": service, "tags": tags, **window})
        for trace in answer.get("data") or []:
            for hop in _hops(trace):
                found.setdefault(hop.span_id, hop)
    return sorted(found.values(), key=lambda h: (h.start_us, h.end_us))


# -- where the time went -------------------------------------------------------------------------------

Landmark = Callable[[Hop], bool]


def _named(name: str, service: str = "") -> Landmark:
    return lambda h: h.name == name and (not service or h.service == service)


def _ended_task(h: Hop) -> bool:
    return h.name == "tasks.lifecycle publish" and h.tags.get("suanli.event_name") in (
        "TaskFinished",
        "TaskFailed",
    )


SUBMITTED = _named(SUBMIT)
RECORDED = _named("scheduling.commit", "scheduling")
DECIDED = _named("scheduling.decide")
DELIVERED = _named("placements process")
STARTED = _named("sensing.start_task")
METERED = _named("usage.metered process")
CHARGED = _named("billing.charge")

# (phase, what it is, from: (landmark, at its end?), to: (landmark, at its end?)): consecutive points of
# one job's path; a phase whose landmarks are not both in the trace is left out.
PHASES: tuple[tuple[str, str, tuple[Landmark, bool], tuple[Landmark, bool]], ...] = (
    ("submit", "SubmitJob recorded the job", (SUBMITTED, False), (RECORDED, True)),
    ("queue", "waiting for a cycle to place it", (RECORDED, True), (DECIDED, False)),
    ("placement", "the cycle's decision and its commit", (DECIDED, False), (DECIDED, True)),
    ("delivery", "outbox relay and broker to the agent", (DECIDED, True), (DELIVERED, False)),
    ("start", "the agent starting the task", (DELIVERED, False), (STARTED, True)),
    ("run", "the task running until its end is reported", (STARTED, True), (_ended_task, False)),
    ("metering", "usage metered and delivered to billing", (_ended_task, False), (METERED, False)),
    ("charge", "billing rating and recording the charge", (METERED, False), (CHARGED, True)),
)


def _first(hops: Sequence[Hop], landmark: Landmark, not_before_us: int) -> Hop | None:
    return next((h for h in hops if landmark(h) and h.start_us >= not_before_us), None)


def phases(hops: Sequence[Hop]) -> list[dict[str, Any]]:
    """The phases of the job's path found in ``hops`` (by start time), each with its start offset and
    seconds. Each landmark is the first such span after the previous phase's start, so a re-sent
    placement or a later usage window does not stretch a phase."""
    origin = origin_us(hops)
    out = []
    after = origin
    for name, what, (start_mark, start_at_end), (stop_mark, stop_at_end) in PHASES:
        first = _first(hops, start_mark, after)
        if first is None:
            continue
        last = first if stop_mark is start_mark else _first(hops, stop_mark, first.start_us)
        if last is None:
            continue
        begin = first.end_us if start_at_end else first.start_us
        end = last.end_us if stop_at_end else last.start_us
        if end < begin:
            continue
        out.append(
            {
                "phase": name,
                "what": what,
                "offset_s": round((begin - origin) / 1e6, 6),
                "seconds": round((end - begin) / 1e6, 6),
            }
        )
        after = first.start_us
    return out


def origin_us(hops: Sequence[Hop]) -> int:
    """The submission's start (the SubmitJob span), else the earliest span's."""
    submit = [h.start_us for h in hops if h.name == SUBMIT]
    if submit:
        return min(submit)
    return min((h.start_us for h in hops), default=0)


# -- output -----------------------------------------------------------------------------------------------


def _seconds(us: int) -> str:
    return f"{us / 1e6:.3f}"


def _ms(us: int) -> str:
    return f"{us / 1000:.1f}"


def hop_data(hop: Hop, origin: int) -> dict[str, Any]:
    return {
        "offset_s": round((hop.start_us - origin) / 1e6, 6),
        "service": hop.service,
        "span": hop.name,
        "kind": hop.kind,
        "duration_ms": round(hop.duration_us / 1000, 3),
        "detail": hop.detail,
        "trace_id": hop.trace_id,
        "span_id": hop.span_id,
        "parent_span_id": hop.parent_id,
    }


def trace_rows(hops: Sequence[Hop], origin: int) -> Rows:
    return Rows(
        columns=(
            "offset_s",
            "service",
            "span",
            "kind",
            "duration_ms",
            "detail",
            "trace",
            "span_id",
            "parent",
        ),
        rows=[
            (
                _seconds(h.start_us - origin),
                h.service,
                h.name,
                h.kind,
                _ms(h.duration_us),
                h.detail,
                h.trace_id,
                h.span_id,
                h.parent_id,
            )
            for h in hops
        ],
        right=frozenset({"offset_s", "duration_ms"}),
        wide=frozenset({"trace", "span_id", "parent"}),
        kind="span",
        names=[h.span_id for h in hops],
        items=[hop_data(h, origin) for h in hops],
        key="spans",
    )


def phase_rows(found: Sequence[dict[str, Any]]) -> Rows:
    return Rows(
        columns=("phase", "offset_s", "seconds", "what"),
        rows=[(p["phase"], f"{p['offset_s']:.3f}", f"{p['seconds']:.3f}", p["what"]) for p in found],
        right=frozenset({"offset_s", "seconds"}),
    )


def show_trace(
    job_id: str, given_url: str, out: Output, *, no_headers: bool = False, sort_by: str = ""
) -> None:
    """Print ``job_id``'s timeline from the trace store at ``given_url`` (or the configured one)."""
    base = traces_url(given_url)
    hops = job_hops(base, job_id)
    if not hops:
        raise fail(
            Failure(
                f"NOT_FOUND: no spans tagged job_id={job_id} in the trace store at {base} "
                "(are the services exporting traces to it?)",
                EXIT_REFUSED,
            )
        )
    origin = origin_us(hops)
    found = phases(hops)
    data = {
        "job_id": job_id,
        "trace_ids": sorted({h.trace_id for h in hops}),
        "spans": [hop_data(h, origin) for h in hops],
        "phases": found,
    }
    rows = trace_rows(hops, origin)
    if not out.human:
        emit_rows(out, data, rows, no_headers=no_headers, sort_by=sort_by)
        return
    if not no_headers:
        traces = len(data["trace_ids"])
        stdout.print(
            Text(f"job {job_id}: {len(hops)} spans in {traces} trace(s), from {base}"), soft_wrap=True
        )
    emit_rows(out, data, rows, no_headers=no_headers, sort_by=sort_by)
    if found:
        title = [] if no_headers else [Text("\nwhere the time went:")]
        show(Group(*title, rows_table(phase_rows(found), headers=not no_headers)))
