"""`suanli queue list -w` and `suanli service list -w`: the commands hand their listing to the one
`--watch` (suanli.cli.watching), so the list is printed once, then only the rows that appear or change.

The RPCs are answered by fakes, one answer per poll, and the polls are bounded instead of slept through.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.cli import queue, queues, service, watching
from suanli.cli.main import app

RUNNER = CliRunner(env={"COLUMNS": "240"})


def bounded(monkeypatch: pytest.MonkeyPatch, polls: int) -> list[float]:
    """`watching.watch` with `polls` rounds and the waits recorded, not slept."""
    slept: list[float] = []
    bound = functools.partial(watching.watch, sleep=slept.append, polls=polls)
    monkeypatch.setattr(watching, "watch", bound)
    return slept


def csv_rows(output: str) -> list[list[str]]:
    return list(csv.reader(output.splitlines()))


def a_queue(name: str, pending: int, used: int) -> pb.Queue:
    resource = pb.ResourceAmount(flavour="cpu", used=used, guaranteed=8000)
    return pb.Queue(name=name, pending_jobs=pending, resources=[resource])


class Queues:
    """Each round's queues one per page, as a server with page size 1 answers; the tokens asked kept."""

    def __init__(self, rounds: list[list[pb.Queue]]) -> None:
        self.rounds = iter(rounds)
        self.left: list[pb.Queue] = []
        self.tokens: list[str] = []

    def ListQueues(self, request: pb.ListQueuesRequest, timeout: float) -> pb.ListQueuesResponse:
        self.tokens.append(request.page_token)
        if not request.page_token:
            self.left = next(self.rounds)
        page, self.left = self.left[:1], self.left[1:]
        return pb.ListQueuesResponse(queues=page, next_page_token=page[0].name if self.left else "")


def test_queue_list_watch_prints_the_list_then_each_queue_that_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub = Queues(
        [
            [a_queue("acme", 0, 1000), a_queue("acme/vision", 1, 0)],
            [a_queue("acme", 0, 1000), a_queue("acme/vision", 1, 0)],  # nothing new: nothing printed
            [a_queue("acme", 0, 1000), a_queue("acme/vision", 0, 2000), a_queue("beta", 0, 0)],
        ]
    )

    @contextmanager
    def scheduler(address: str) -> Iterator[Queues]:
        yield stub

    monkeypatch.setattr(queue, "scheduler", scheduler)
    slept = bounded(monkeypatch, polls=2)
    result = RUNNER.invoke(app, ["queue", "list", "-w", "--interval", "0.5", "-o", "csv", "--no-headers"])
    assert result.exit_code == 0, result.output
    # queue, cohort, pending, running, share, flavour, used
    assert [row[:7] for row in csv_rows(result.stdout)] == [
        ["acme", "-", "0", "0", "0.00", "cpu", "1"],
        ["acme/vision", "-", "1", "0", "0.00", "cpu", "0"],
        ["acme/vision", "-", "0", "0", "0.00", "cpu", "2"],
        ["beta", "-", "0", "0", "0.00", "cpu", "0"],
    ]
    assert slept == [0.5, 0.5]
    assert stub.tokens == ["", "acme"] * 2 + ["", "acme", "acme/vision"]


def test_queues_lists_every_page_of_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = Queues([[a_queue("acme", 0, 1000), a_queue("acme/vision", 1, 0), a_queue("beta", 2, 0)]])

    @contextmanager
    def scheduler(address: str) -> Iterator[Queues]:
        yield stub

    monkeypatch.setattr(queues, "scheduler", scheduler)
    result = RUNNER.invoke(app, ["queues", "-o", "csv", "--no-headers"])
    assert result.exit_code == 0, result.output
    assert [row[:3] for row in csv_rows(result.stdout)] == [
        ["acme", "-", "0"],
        ["acme/vision", "-", "1"],
        ["beta", "-", "2"],
    ]
    assert stub.tokens == ["", "acme", "acme/vision"]


def a_service(name: str, desired: int, placed: int) -> spb.Service:
    return spb.Service(
        service_id=f"s-{name}",
        tenant="acme",
        name=name,
        model="llama",
        state="active",
        desired_replicas=desired,
        placed_replicas=placed,
        min_replicas=1,
        max_replicas=4,
    )


class Services:
    """Each round's services over two pages, as a server with a small page size answers."""

    def __init__(self, rounds: list[list[spb.Service]]) -> None:
        self.rounds = iter(rounds)
        self.page: list[spb.Service] = []
        self.tenants: list[str] = []

    def ListServices(self, request: spb.ListServicesRequest, timeout: float) -> spb.ListServicesResponse:
        self.tenants.append(request.tenant)
        if not request.page_token:
            found = next(self.rounds)
            self.page = found[1:]
            return spb.ListServicesResponse(services=found[:1], next_page_token="more" if self.page else "")
        return spb.ListServicesResponse(services=self.page)


class Channel:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_service_list_watch_prints_the_list_then_each_service_that_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub = Services(
        [
            [a_service("chat", 2, 1), a_service("embed", 1, 1)],
            [a_service("chat", 2, 2), a_service("embed", 1, 1)],  # chat's second replica placed
            [a_service("embed", 1, 1), a_service("rerank", 1, 0)],  # chat deleted: not printed
        ]
    )
    channel = Channel()

    def connect(addr: str) -> tuple[str, Channel, Services]:
        return "serving:1", channel, stub

    monkeypatch.setattr(service, "_connect", connect)
    slept = bounded(monkeypatch, polls=2)
    argv = ["service", "list", "--watch", "-t", "acme", "-o", "csv", "--no-headers"]
    result = RUNNER.invoke(app, argv)
    assert result.exit_code == 0, result.output
    # name, tenant, model, state, desired, placed
    assert [row[:6] for row in csv_rows(result.stdout)] == [
        ["chat", "acme", "llama", "active", "2", "1"],
        ["embed", "acme", "llama", "active", "1", "1"],
        ["chat", "acme", "llama", "active", "2", "2"],
        ["rerank", "acme", "llama", "active", "1", "0"],
    ]
    assert slept == [2.0, 2.0]  # the default interval
    assert set(stub.tenants) == {"acme"} and len(stub.tenants) == 6  # every page of every poll
    assert channel.closed


def test_service_list_without_watch_lists_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = Services([[a_service("chat", 2, 1), a_service("embed", 1, 1)]])
    monkeypatch.setattr(service, "_connect", lambda addr: ("serving:1", Channel(), stub))
    result = RUNNER.invoke(app, ["service", "list", "-o", "name"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["service/chat", "service/embed"]
