"""Create the catalogue's topics (and their dead-letter topics) idempotently at service start."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import for_code

from suanli.bus.topics import TopicSpec, resolve_prefix

log = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = 36


class TopicCreationError(RuntimeError):
    """The broker refused to create a topic for a reason other than it already existing."""


@dataclass(frozen=True, slots=True)
class EnsureResult:
    created: tuple[str, ...]
    existing: tuple[str, ...]


async def ensure_topics(
    bootstrap: str,
    specs: Iterable[TopicSpec],
    *,
    prefix: str | None = None,
    with_dlq: bool = True,
    replication_factor: int = 1,
    timeout_ms: int = 30_000,
) -> EnsureResult:
    """Create every topic in ``specs`` (and its ``.dlq``) under ``prefix``; existing ones are left alone.

    ``prefix=None`` reads ``SUANLI_TOPIC_PREFIX``. Configs are passed at creation because that is the
    only time Tansu accepts them. An existing topic is not altered (no AlterConfigs/CreatePartitions
    on Tansu), so a changed partition count needs a migration, not a restart.
    """
    resolved = resolve_prefix(prefix)
    wanted: list[TopicSpec] = []
    for topic in specs:
        physical = topic.prefixed(resolved)
        wanted.append(physical)
        if with_dlq:
            wanted.append(physical.dlq_spec())
    if not wanted:
        return EnsureResult((), ())
    new_topics = [
        NewTopic(t.name, t.partitions, replication_factor, topic_configs=t.configs) for t in wanted
    ]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    await admin.start()
    try:
        response = await admin.create_topics(new_topics, timeout_ms=timeout_ms)
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
    return EnsureResult(tuple(created), tuple(existing))
