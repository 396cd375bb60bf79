"""Inputs of `suanli simulate --fleet FILE --jobs DIR_OR_FILE` (docs/simulate.md): a fleet file as the
scheduler would see it, job specs with arrival times and durations, and the queue configuration.

The fleet is read by the sensing service's fleet loader, as `suanli agent --simulate` reads it, and turned
into the nodes and region links the scheduler would hear from it. Job specs are validated by the kernel's
job-spec model and accepted by the scheduler's own `validate_submit`, so a spec replays here exactly when
`suanli job submit` would take it. Every mistake is a `WhatIfInputError` with one line naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import JobSpecError, to_proto, validate_document
from suanli.jobspec.units import parse_duration_s
from suanli.resources.network import measured_network
from suanli.scheduling.domain.jobs import AcceptedSpec
from suanli.scheduling.domain.model import GpuDevice, Node
from suanli.scheduling.domain.network import NetworkSnapshot, RegionLink
from suanli.scheduling.domain.queueing import QueueTree
from suanli.scheduling.entrypoints.validation import validate_submit
from suanli.scheduling.service_layer.errors import InvalidSpec
from suanli.scheduling.service_layer.queues_config import QueueConfigError, parse_queue_config
from suanli.scheduling.simulator.whatif import DEFAULT_QUEUE, WhatIfJob, WhatIfSetup, never_fits
from suanli.sensing.adapters.fleet_file import load_fleet
from suanli.sensing.domain.fleet import FleetError, FleetSpec
from suanli.sensing.domain.links import SiteRef

WRAPPER_KEYS = frozenset({"at", "duration", "copies", "job"})
MAX_COPIES = 10_000
YAML_SUFFIXES = (".yaml", ".yml")


class WhatIfInputError(ValueError):
    """Input the what-if mode cannot replay; the message is one line and names the file."""


@dataclass(frozen=True, slots=True)
class Inputs:
    setup: WhatIfSetup
    jobs: tuple[WhatIfJob, ...]
    fleet: str  # the fleet's name


def fleet_nodes(fleet: FleetSpec) -> tuple[Node, ...]:
    """The nodes as the scheduler's capacity view holds them once the simulated agent has registered them
    (allocatable CPU = all cores, every device of the node's model, the node's labels)."""
    return tuple(
        Node(
            id=n.identity.node_id,
            cpu_milli=n.cpu_cores * 1000,
            memory_mib=n.memory_mib,
            gpus=tuple(GpuDevice(i, n.gpu_model or "", n.gpu_memory_mib) for i in range(n.gpus)),
            region=n.identity.region,
            zone=n.identity.zone,
            labels=tuple(sorted(n.identity.labels.items())),
        )
        for n in fleet.nodes
    )


def fleet_network(fleet: FleetSpec) -> NetworkSnapshot:
    """Region links from each of the fleet's regions to every region of the fleet or the measured network
    (a job's data region may be outside the fleet), all up, with the fleet's link model's mean RTT: what
    routing would publish once probes have settled."""
    sites = {s.region: s for s in reversed(fleet.sites)}  # the first site of each region speaks for it
    targets = dict.fromkeys([*fleet.regions, *measured_network().regions])
    links = []
    for src in fleet.regions:
        for dst in targets:
            if dst == src:
                continue
            profile = fleet.links.profile(sites[src], sites.get(dst) or SiteRef(dst, dst))
            links.append(RegionLink(src, dst, profile.rtt_ms, profile.loss_ratio, profile.bandwidth_mbps))
            if dst not in sites:  # the reverse direction is known only this way for regions outside it
                links.append(RegionLink(dst, src, profile.rtt_ms, profile.loss_ratio, profile.bandwidth_mbps))
    return NetworkSnapshot(links)


def job_files(path: Path) -> list[Path]:
    """A file, or every *.yaml / *.yml directly in a directory (sorted by name)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES)
        if not files:
            raise WhatIfInputError(f"{path}: no *.yaml job files in this directory")
        return files
    if not path.is_file():
        raise WhatIfInputError(f"{path}: no such file or directory")
    return [path]


def read_text(path: Path) -> str:
    """The file's text, or the one-line error (unreadable, not UTF-8)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WhatIfInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise WhatIfInputError(f"{path}: not UTF-8 text") from None


def _entries(path: Path) -> Iterator[tuple[str, Any]]:
    """(label, entry) for every entry of every YAML document in the file; a document is one entry or a
    list of them."""
    try:
        documents = list(yaml.safe_load_all(read_text(path)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise WhatIfInputError(f"{path}: {where}not valid YAML: {problem}") from None
    documents = [d for d in documents if d is not None]
    if not documents:
        raise WhatIfInputError(f"{path}: no job specs in the file")
    many = len(documents) > 1 or isinstance(documents[0], list)
    k = 0
    for document in documents:
        for entry in document if isinstance(document, list) else [document]:
            yield (f"{path}[{k}]" if many else str(path)), entry
            k += 1


def _seconds(value: Any, label: str, key: str) -> float:
    if isinstance(value, bool):
        raise WhatIfInputError(f"{label}: {key}: must be seconds or a duration like 90s (got {value!r})")
    try:
        seconds = parse_duration_s(value)
    except ValueError as exc:
        raise WhatIfInputError(f"{label}: {key}: {exc}") from None
    if not math.isfinite(seconds):
        raise WhatIfInputError(f"{label}: {key}: must be finite (got {value!r})")
    return seconds


def _spec(document: Any, label: str) -> AcceptedSpec:
    """The scheduler's accepted form of one job spec document, or the one-line error."""
    if not isinstance(document, Mapping) or "tasks" not in document:
        got = type(document).__name__ if not isinstance(document, Mapping) else "a mapping without tasks"
        raise WhatIfInputError(
            f"{label}: not a job spec (a mapping with name, queue and tasks, or {{at, duration, job}}); "
            f"got {got}"
        )
    try:
        spec = validate_document(dict(document), source=label)
    except JobSpecError as exc:
        raise WhatIfInputError(f"{label}: invalid job spec: {'; '.join(exc.problems)}") from None
    try:
        return validate_submit(pb.SubmitJobRequest(spec=to_proto(spec)))
    except InvalidSpec as exc:
        raise WhatIfInputError(f"{label}: invalid job spec: {exc}") from None


def parse_entry(entry: Any, label: str, number: int) -> list[WhatIfJob]:
    """One entry: a job spec, or a wrapper `{at, duration, copies, job}` around one (module docs)."""
    at: float | None = None
    duration: float | None = None
    copies = 1
    document = entry
    if isinstance(entry, Mapping) and "job" in entry:
        unknown = sorted(set(map(str, entry)) - WRAPPER_KEYS)
        if unknown:
            raise WhatIfInputError(
                f"{label}: unknown key(s) {unknown}; a wrapper has at, duration, copies, job"
            )
        document = entry["job"]
        if entry.get("at") is not None:
            at = _seconds(entry["at"], label, "at")
        if entry.get("duration") is not None:
            duration = _seconds(entry["duration"], label, "duration")
            if duration <= 0:
                raise WhatIfInputError(f"{label}: duration: must be > 0 (got {entry['duration']!r})")
        copies = entry.get("copies", 1)
        if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
            raise WhatIfInputError(f"{label}: copies: must be an integer 1..{MAX_COPIES} (got {copies!r})")
    spec = _spec(document, label)
    timeless = [t.name for t in spec.tasks if not t.duration_s]
    if timeless and duration is None:
        raise WhatIfInputError(
            f"{label}: task(s) {', '.join(timeless)} have no duration: set tasks[].duration in the spec "
            "or `duration` in a wrapper {at, duration, job}"
        )
    tasks = tuple(t if t.duration_s else replace(t, duration_s=duration) for t in spec.tasks)
    jobs = []
    for c in range(copies):
        job_id = f"{number + c:04d}-{spec.name}"
        ids = tuple(replace(t, task_id=f"{job_id}-{t.name}") for t in tasks)
        jobs.append(WhatIfJob(job_id, label, replace(spec, tasks=ids), at))
    return jobs


def load_jobs(path: Path) -> list[WhatIfJob]:
    jobs: list[WhatIfJob] = []
    for file in job_files(path):
        for label, entry in _entries(file):
            jobs.extend(parse_entry(entry, label, len(jobs)))
    return jobs


def _queues(path: Path | None, jobs: Sequence[WhatIfJob]) -> tuple[WhatIfSetup, list[WhatIfJob]]:
    """Without a queue file: one queue without quota for every job, priority classes ignored. With one:
    its tree and classes, and every job's queue and class must be in it."""
    if path is None:
        open_jobs = [replace(j, spec=replace(j.spec, queue=DEFAULT_QUEUE, priority_class="")) for j in jobs]
        return WhatIfSetup(nodes=()), open_jobs
    try:
        config = parse_queue_config(read_text(path))
    except (QueueConfigError, yaml.YAMLError) as exc:
        raise WhatIfInputError(f"{path}: {str(exc).splitlines()[0]}") from None
    tree = QueueTree(config.queues)
    classes = {pc.name for pc in config.priority_classes}
    for job in jobs:
        if job.spec.queue not in tree:
            raise WhatIfInputError(f"{job.source}: queue {job.spec.queue!r} is not in {path}")
        if job.spec.priority_class and job.spec.priority_class not in classes:
            raise WhatIfInputError(
                f"{job.source}: priority class {job.spec.priority_class!r} is not in {path}"
            )
    return WhatIfSetup(nodes=(), queues=config.queues, priority_classes=config.priority_classes), list(jobs)


def load_inputs(
    fleet_path: Path, jobs_path: Path, queues_path: Path | None, rate: float | None, policy: str
) -> Inputs:
    """Everything the replay needs, checked: a job the fleet cannot hold even when empty is an error
    (checked with ``policy``, the first one asked for), not a line in the report."""
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise WhatIfInputError(f"--rate: must be a number of jobs per second > 0 (got {rate})")
    if not fleet_path.is_file():
        raise WhatIfInputError(f"{fleet_path}: no such fleet file")
    read_text(fleet_path)  # unreadable or not text: said here, as for the other files
    try:
        fleet = load_fleet(fleet_path)
    except FleetError as exc:
        raise WhatIfInputError(f"not a fleet file: {str(exc).splitlines()[0]}") from None
    jobs = load_jobs(jobs_path)
    base, jobs = _queues(queues_path, jobs)
    setup = replace(base, nodes=fleet_nodes(fleet), network=fleet_network(fleet), rate_per_s=rate)
    seen: dict[Any, dict[str, Any] | None] = {}
    for job in jobs:
        shape = replace(
            job.spec, name="", tasks=tuple(replace(t, task_id="", name="") for t in job.spec.tasks)
        )
        if shape not in seen:
            seen[shape] = never_fits(setup, job, policy)
        why = seen[shape]
        if why is not None:
            raise WhatIfInputError(
                f"{job.source}: job {job.spec.name!r} never fits fleet {fleet.name} ({fleet_path}): "
                f"{why.get('message', why.get('code'))}"
            )
    return Inputs(setup, tuple(jobs), fleet.name)
