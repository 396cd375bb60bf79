"""Create the catalogue's topics (and their dead-letter topics) idempotently at service start."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import for_code

from suanli.bus.security import client_options
from suanli.bus.topics import TopicSpec, resolve_prefix

log = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = 36

TOPIC_REPLICATION_ENV = "SUANLI_TOPIC_REPLICATION"
"""Replication factor of topics ``ensure_topics`` creates when the caller passes none (default 1)."""


class TopicCreationError(RuntimeError):
    """The broker refused to create a topic for a reason other than it already existing."""


def resolve_replication_factor(replication_factor: int | None = None) -> int:
    """An explicit factor wins; otherwise ``SUANLI_TOPIC_REPLICATION``, otherwise 1 (the development broker).

    A production cluster with ``min.insync.replicas=2`` needs 3: a topic with fewer replicas than that
    refuses every ``acks=all`` write. A value that is not a whole number >= 1 raises ``ValueError``.
    """
    if replication_factor is None:
        raw = os.environ.get(TOPIC_REPLICATION_ENV, "").strip()
        if not raw:
            return 1
        try:
            replication_factor = int(raw)
        except ValueError:
            raise ValueError(f"{TOPIC_REPLICATION_ENV}={raw!r} is not a whole number") from None
        source = f"{TOPIC_REPLICATION_ENV}={raw!r}"
    else:
        source = f"replication_factor={replication_factor!r}"
    if replication_factor < 1:
        raise ValueError(f"{source}: the replication factor must be at least 1")
    return replication_factor


@dataclass(frozen=True, slots=True)
class EnsureResult:
    """What `ensure_topics` did: topics created, topics that existed, and the answering cluster's id.

    The id is None from a broker that does not say. That topics had to be created tells a broker that
    restarted empty only to the first client to look; a changed cluster id tells every client (the
    embedded broker takes a new one at each start, `suanli.infra.broker`; a Kafka cluster keeps its own
    for life).
    """

    created: tuple[str, ...]
    existing: tuple[str, ...]
    cluster_id: str | None = None


async def ensure_topics(
    bootstrap: str,
    specs: Iterable[TopicSpec],
    *,
    prefix: str | None = None,
    with_dlq: bool = True,
    replication_factor: int | None = None,
    timeout_ms: int = 30_000,
) -> EnsureResult:
    """Create every topic in ``specs`` (and its ``.dlq``) under ``prefix``; existing ones are left alone.

    ``prefix=None`` reads ``SUANLI_TOPIC_PREFIX``; ``replication_factor=None`` reads
    ``SUANLI_TOPIC_REPLICATION`` (default 1, see ``resolve_replication_factor``); the DLQs get the
    same factor. Configs are passed at creation because that is the only time Tansu accepts them. An
    existing topic is not altered (no AlterConfigs/CreatePartitions on Tansu), so a changed partition
    count or replication factor needs a migration, not a restart.
    """
    resolved = resolve_prefix(prefix)
    replicas = resolve_replication_factor(replication_factor)
    wanted: list[TopicSpec] = []
    for topic in specs:
        physical = topic.prefixed(resolved)
        wanted.append(physical)
        if with_dlq:
            wanted.append(physical.dlq_spec())
    if not wanted:
        return EnsureResult((), ())
    new_topics = [NewTopic(t.name, t.partitions, replicas, topic_configs=t.configs) for t in wanted]
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms, **client_options()
    )
    await admin.start()
    try:
        response = await admin.create_topics(new_topics, timeout_ms=timeout_ms)
        cluster_id = (await admin.describe_cluster()).get("cluster_id")
    finally:
        await admin.close()
    created: list[str] = []
    existing: list[str] = []
    failures: list[str] = []
    for entry in response.to_object()["topic_errors"]:
        name, code = entry["topic"], entry["error_code"]
        if code == 0:
            created.append(name)
        elif code == _TOPIC_ALREADY_EXISTS:
            existing.append(name)
        else:
            message = entry.get("error_message") or for_code(code).__name__
            failures.append(f"{name}: {message} (error {code})")
    if failures:
        raise TopicCreationError("could not create topics: " + "; ".join(failures))
    if created:
        log.info("created topics: %s", ", ".join(created))
    return EnsureResult(tuple(created), tuple(existing), cluster_id or None)
