"""The bus's view of the topic catalogue: `TopicSpec` handles and the naming rules for prefixes and DLQs.

The topics themselves are defined once, in `suanli.contracts.catalogue`; this module adds what depends on
the deployment, the namespace prefix from ``SUANLI_TOPIC_PREFIX``. Every service names topics through it,
so a prefix (tests, several deployments on one cluster) and the dead-letter convention are applied in
exactly one place.
"""

from __future__ import annotations

import os
from typing import Final

from suanli.contracts import catalogue
from suanli.contracts.catalogue import (
    DAY_MS,
    DLQ_RETENTION_MS,
    DLQ_SUFFIX,
    FOREVER_MS,
    CleanupPolicy,
    TopicSpec,
    dlq_topic,
    qualified,
)
from suanli.contracts.catalogue import TOPIC_SPECS as CATALOGUE
from suanli.contracts.catalogue import TOPICS_BY_NAME as BY_NAME
from suanli.contracts.catalogue import topic_spec as spec

__all__ = [
    "AUTH_EVENTS",
    "BILLING_EVENTS",
    "BY_NAME",
    "CAPACITY_NODES",
    "CATALOGUE",
    "DAY_MS",
    "DLQ_RETENTION_MS",
    "DLQ_SUFFIX",
    "FOREVER_MS",
    "JOBS_COMMANDS",
    "JOBS_EVENTS",
    "JOBS_REPLIES",
    "LINKS_MEASURED",
    "NETWORK_LINKS",
    "NODES_STATUS",
    "NODE_SNAPSHOTS",
    "PLACEMENTS",
    "QUEUES_EVENTS",
    "SERVICES_EVENTS",
    "SERVICES_LOAD",
    "TASKS_LIFECYCLE",
    "TOPIC_PREFIX_ENV",
    "USAGE_METERED",
    "USAGE_SAMPLES",
    "CleanupPolicy",
    "TopicSpec",
    "dlq_topic",
    "resolve_prefix",
    "spec",
    "topic_name",
]

TOPIC_PREFIX_ENV: Final = "SUANLI_TOPIC_PREFIX"

# The catalogue's entries by their constant names, for callers that hold a spec (partitions, configs).
NODE_SNAPSHOTS: Final = spec(catalogue.NODE_SNAPSHOTS)
LINKS_MEASURED: Final = spec(catalogue.LINKS_MEASURED)
TASKS_LIFECYCLE: Final = spec(catalogue.TASKS_LIFECYCLE)
USAGE_SAMPLES: Final = spec(catalogue.USAGE_SAMPLES)
CAPACITY_NODES: Final = spec(catalogue.CAPACITY_NODES)
NETWORK_LINKS: Final = spec(catalogue.NETWORK_LINKS)
NODES_STATUS: Final = spec(catalogue.NODES_STATUS)
USAGE_METERED: Final = spec(catalogue.USAGE_METERED)
JOBS_EVENTS: Final = spec(catalogue.JOBS_EVENTS)
JOBS_COMMANDS: Final = spec(catalogue.JOBS_COMMANDS)
JOBS_REPLIES: Final = spec(catalogue.JOBS_REPLIES)
PLACEMENTS: Final = spec(catalogue.PLACEMENTS)
QUEUES_EVENTS: Final = spec(catalogue.QUEUES_EVENTS)
BILLING_EVENTS: Final = spec(catalogue.BILLING_EVENTS)
AUTH_EVENTS: Final = spec(catalogue.AUTH_EVENTS)
SERVICES_EVENTS: Final = spec(catalogue.SERVICES_EVENTS)
SERVICES_LOAD: Final = spec(catalogue.SERVICES_LOAD)


def resolve_prefix(prefix: str | None = None) -> str:
    """An explicit prefix wins (``""`` means none); otherwise ``SUANLI_TOPIC_PREFIX`` or none."""
    if prefix is not None:
        return prefix
    return os.environ.get(TOPIC_PREFIX_ENV, "")


def topic_name(name: str, prefix: str | None = None) -> str:
    """The physical topic name of catalogue topic ``name`` under ``prefix``."""
    return qualified(name, resolve_prefix(prefix))
