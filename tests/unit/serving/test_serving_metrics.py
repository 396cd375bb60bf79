"""Serving's metrics: committed decisions counted by reason and cause (a rolled-back or repeated unit not
at all), load reports by outcome, and the gauges by model from the live services and the load view."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.clock import ManualClock
from suanli.contracts.load import LoadView, ReplicaLoad
from suanli.eventstore import AlreadyProcessed
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.adapters.metrics import MeteredServing, ServingMetrics
from suanli.serving.domain.service import ReplicaPolicy, Service
from suanli.serving.service_layer.serving import ServingService
from suanli.telemetry import names

NOW = datetime(2026, 12, 1, tzinfo=UTC)
# The repository's example service (llama-2-7b on half an L40S, 2 to 8 replicas, queue globex).
SPEC: dict[str, Any] = yaml.safe_load((Path(__file__).parents[3] / "examples/services/chat.yaml").read_text())

Points = dict[tuple[tuple[str, Any], ...], float]


def _points(reader: InMemoryMetricReader, name: str) -> Points:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        tuple(sorted(p.attributes.items())): p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    }


def _setup() -> tuple[InMemoryMetricReader, ServingMetrics, InMemoryServing, MeteredServing, ServingService]:
    reader = InMemoryMetricReader()
    metrics = ServingMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    ids = itertools.count(1)
    store = InMemoryServing(ManualClock(NOW), lambda: uuid.UUID(int=next(ids)))
    serial = itertools.count(1)
    service = ServingService(default_catalogue(), ReplicaPolicy(), lambda: f"svc-{next(serial)}")
    return reader, metrics, store, MeteredServing(store, metrics), service


async def _created(store: InMemoryServing, uow: MeteredServing, service: ServingService) -> Service:
    async with uow.begin() as unit:
        await service.create(unit, "globex", SPEC, 0, "alice@globex")
    stored = await store.get("globex", "chat")
    assert stored is not None
    return stored.service


async def test_committed_decisions_are_counted_by_reason_and_cause_from_zero() -> None:
    reader, _, store, uow, service = _setup()
    # Every known reason and cause is served before anything happens (a rate of 0, not no series).
    assert set(_points(reader, names.SERVING_SCALE_DECISIONS).values()) == {0}
    assert {dict(k)["cause"] for k in _points(reader, names.SERVING_REPLICAS_STOPPED)} == {
        "failed",
        "finished",
        "cancelled",
        "refused",
        "requeued",
    }

    created = await _created(store, uow, service)
    first = created.serving_replicas[0]
    async with uow.tracked("serving", "jobs.events", 0, 1) as unit:
        await service.job_submitted(unit, first.request_id, "job-1")
    async with uow.tracked("serving", "jobs.events", 0, 2) as unit:
        await service.job_ended(unit, "job-1", "JobFailed", "exit code 1")
    # The same record again: the unit of work refuses it, nothing is counted twice.
    with pytest.raises(AlreadyProcessed):
        async with uow.tracked("serving", "jobs.events", 0, 2) as unit:
            await service.job_ended(unit, "job-1", "JobFailed", "exit code 1")
    # A unit that fails after deciding rolls back: its scale-up is not counted.
    with pytest.raises(RuntimeError):
        async with uow.begin() as unit:
            await service.scale(unit, "globex", "chat", 4, "alice@globex")
            raise RuntimeError("the transaction fails")

    scaled = {dict(k)["reason"]: v for k, v in _points(reader, names.SERVING_SCALE_DECISIONS).items()}
    assert scaled == {
        "created": 1,
        "manual": 0,
        "autoscaler:kpa": 0,
        "autoscaler:slo": 0,
        "replica-replaced": 1,
    }
    stopped = {dict(k)["cause"]: v for k, v in _points(reader, names.SERVING_REPLICAS_STOPPED).items()}
    assert stopped == {"failed": 1, "finished": 0, "cancelled": 0, "refused": 0, "requeued": 0}


def _load(service_id: str, replica_id: str, in_flight: int, queued: int, at: datetime) -> ReplicaLoad:
    return ReplicaLoad(
        service_id,
        replica_id,
        "cn-east",
        "10.0.0.1:8000",
        in_flight,
        queued,
        16,
        1000.0,
        0.02,
        0.5,
        0.1,
        4096,
        interval_s=1.0,
        reported_at=at,
    )


async def test_gauges_count_live_services_replicas_and_fresh_load_by_model() -> None:
    reader, metrics, store, uow, service = _setup()
    chat = await _created(store, uow, service)
    async with uow.begin() as unit:
        # 26 GB of 13b weights: a whole L40S (48 GB).
        bigger = {**SPEC, "name": "big", "model": "llama-2-13b", "resources": {**SPEC["resources"], "gpu": 1}}
        await service.create(unit, "globex", bigger, 3, "alice@globex")
    big = await store.get("globex", "big")
    assert big is not None
    r1, r2 = (r.replica_id for r in chat.serving_replicas)
    loads = LoadView()
    loads.report(_load(chat.service_id, r1, 5, 2, NOW), NOW)
    loads.report(_load(chat.service_id, r2, 3, 0, NOW - timedelta(seconds=10)), NOW)  # stale: left out
    loads.report(_load("svc-deleted", "x", 7, 7, NOW), NOW)  # no live service: left out

    metrics.observe([chat, big.service], loads.fresh(NOW))
    by_model = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_SERVICES).items()}
    assert by_model == {"llama-2-7b": 1, "llama-2-13b": 1}
    desired = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_REPLICAS_DESIRED).items()}
    assert desired == {"llama-2-7b": 2, "llama-2-13b": 3}
    replicas = {
        (dict(k)["model"], dict(k)["state"]): v for k, v in _points(reader, names.SERVING_REPLICAS).items()
    }
    assert replicas[("llama-2-7b", "requested")] == 2 and replicas[("llama-2-13b", "requested")] == 3
    assert replicas[("llama-2-7b", "running")] == 0  # every state is served, 0 when empty
    assert len(replicas) == 2 * 5
    in_flight = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_IN_FLIGHT).items()}
    queued = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_QUEUED).items()}
    assert in_flight == {"llama-2-7b": 5, "llama-2-13b": 0} and queued == {"llama-2-7b": 2, "llama-2-13b": 0}

    # The 13b service deleted: its model reports 0 instead of its last counts.
    metrics.observe([chat], [])
    by_model = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_SERVICES).items()}
    assert by_model == {"llama-2-7b": 1, "llama-2-13b": 0}
    in_flight = {dict(k)["model"]: v for k, v in _points(reader, names.SERVING_IN_FLIGHT).items()}
    assert in_flight == {"llama-2-7b": 0, "llama-2-13b": 0}


def test_load_reports_are_counted_by_outcome() -> None:
    reader = InMemoryMetricReader()
    metrics = ServingMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    view = LoadView()
    for at in (NOW, NOW + timedelta(seconds=1), NOW):  # the last one older than the one held
        metrics.load_reported(view.report(_load("svc-1", "r1", 1, 0, at), NOW))
    outcomes = {dict(k)["outcome"]: v for k, v in _points(reader, names.SERVING_LOAD_REPORTS).items()}
    assert outcomes == {"kept": 2, "outdated": 1}
