"""The replication factor of created topics: explicit argument, else SUANLI_TOPIC_REPLICATION, else 1."""

from __future__ import annotations

from typing import Any

import pytest

from suanli.bus import TOPIC_REPLICATION_ENV, admin, ensure_topics, resolve_replication_factor, topics


def test_default_is_one_without_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOPIC_REPLICATION_ENV, raising=False)
    assert resolve_replication_factor() == 1
    monkeypatch.setenv(TOPIC_REPLICATION_ENV, "  ")
    assert resolve_replication_factor() == 1, "blank counts as unset"


def test_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOPIC_REPLICATION_ENV, " 3 ")
    assert resolve_replication_factor() == 3
    assert resolve_replication_factor(None) == 3


def test_explicit_factor_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOPIC_REPLICATION_ENV, "3")
    assert resolve_replication_factor(1) == 1
    assert resolve_replication_factor(2) == 2


@pytest.mark.parametrize("raw", ["three", "2.5", "0", "-1"])
def test_bad_environment_values_fail_loudly(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(TOPIC_REPLICATION_ENV, raw)
    with pytest.raises(ValueError, match=TOPIC_REPLICATION_ENV):
        resolve_replication_factor()


def test_explicit_zero_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOPIC_REPLICATION_ENV, raising=False)
    with pytest.raises(ValueError, match="at least 1"):
        resolve_replication_factor(0)


class _FakeResponse:
    def __init__(self, names: list[str]) -> None:
        self._names = names

    def to_object(self) -> dict[str, Any]:
        return {"topic_errors": [{"topic": n, "error_code": 0} for n in self._names]}


class _FakeAdmin:
    requested: list[Any]

    def __init__(self, **_: Any) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def create_topics(self, new_topics: list[Any], timeout_ms: int) -> _FakeResponse:
        _FakeAdmin.requested = list(new_topics)
        return _FakeResponse([t.name for t in new_topics])

    async def describe_cluster(self) -> dict[str, Any]:
        return {"cluster_id": "fake-cluster", "brokers": []}


@pytest.mark.parametrize(("env", "explicit", "expected"), [(None, None, 1), ("3", None, 3), ("3", 1, 1)])
async def test_ensure_topics_creates_topics_and_dlqs_with_the_resolved_factor(
    monkeypatch: pytest.MonkeyPatch, env: str | None, explicit: int | None, expected: int
) -> None:
    """Callers that pass no factor (every service) get the environment's; the DLQ gets the same."""
    if env is None:
        monkeypatch.delenv(TOPIC_REPLICATION_ENV, raising=False)
    else:
        monkeypatch.setenv(TOPIC_REPLICATION_ENV, env)
    monkeypatch.setattr(admin, "AIOKafkaAdminClient", _FakeAdmin)
    result = await ensure_topics("kafka:9092", [topics.PLACEMENTS], prefix="", replication_factor=explicit)
    assert result.created == ("placements", "placements.dlq")
    assert [t.replication_factor for t in _FakeAdmin.requested] == [expected, expected]
