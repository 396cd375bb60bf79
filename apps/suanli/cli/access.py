"""Who may touch what: each service's PostgreSQL role and Kafka user, derived from the code that uses them.

The database side comes from the services' settings (the schema each keeps its state in) and the token
ledger's schema, which every gRPC service reads; the Kafka side from the topic catalogue (each event's
bounded context names the process that produces it) and the services' own lists of the topics they
consume. Nothing here repeats a topic or schema name, so a new topic or consumer changes the ACLs of
`suanli dev kafka-acls` and the grants of `suanli dev db-roles` with no edit here (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from suanli.billing.entrypoints.service import INPUTS as BILLING_INPUTS
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.bus.acls import DEFAULT_USER_PREFIX, KafkaUser
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore.roles import DEFAULT_ROLE_PREFIX, ServiceRole
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.metering.entrypoints.topics import FACTS, MeteringTopics
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.entrypoints.topics import PROBES, RoutingTopics
from suanli.scheduling.entrypoints.app import COMMAND_TOPICS, LEADER_TOPICS, REPLIES, VIEW_TOPICS
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.sensing.adapters.bus import CONSUMED_TOPICS, PRODUCED_TOPICS
from suanli.sensing.entrypoints.settings import GROUP_PREFIX as AGENT_GROUP_PREFIX
from suanli.serving.entrypoints.consumer import INPUTS as SERVING_INPUTS
from suanli.serving.entrypoints.consumer import LOAD as SERVING_LOAD
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.settings import ServiceSettings

# The process that produces each bounded context's events (suanli.contracts.catalogue.CONTEXTS): the node
# agent runs sensing and execution; the token ledger's outbox is relayed as the auth user.
PRODUCER_OF_CONTEXT: Mapping[str, str] = {
    "sensing": "agent",
    "execution": "agent",
    "metering": "metering",
    "routing": "routing",
    "scheduling": "scheduling",
    "billing": "billing",
    "serving": "serving",
    "auth": "auth",
}
# Topics a context names whose records another process writes: a replica's load reports come from the
# replica (its sidecar), not from the serving service that reads them (docs/serving.md).
PRODUCER_OF_TOPIC: Mapping[str, str] = {SERVING_LOAD: "replica"}
# Commands come from upstream systems (docs/commands.md), not from the context whose schema they use.
UPSTREAM = "upstream"


def _setting(settings: type[ServiceSettings], field: str, env: Mapping[str, str]) -> str:
    """A settings field as the environment sets it, else its default (no other field need be valid)."""
    for name in settings.env_names(field):
        if env.get(name):
            return env[name]
    return str(settings.model_fields[field].get_default(call_default_factory=True))


def service_roles(
    prefix: str = DEFAULT_ROLE_PREFIX, env: Mapping[str, str] | None = None
) -> list[ServiceRole]:
    """The database role of every service that connects to PostgreSQL, and what each owns and reads.

    ``auth`` owns the token ledger (the `suanli auth` CLI and its outbox relay run as it); the gRPC
    services only read it to refuse revoked tokens.
    """
    env = os.environ if env is None else env
    auth = _setting(SchedulingSettings, "auth_schema", env)
    return [
        ServiceRole(f"{prefix}auth", schema=auth),
        ServiceRole(
            f"{prefix}scheduling", schema=_setting(SchedulingSettings, "store_schema", env), reads=(auth,)
        ),
        ServiceRole(f"{prefix}billing", schema=_setting(BillingSettings, "db_schema", env), reads=(auth,)),
        ServiceRole(f"{prefix}serving", schema=_setting(ServingSettings, "db_schema", env), reads=(auth,)),
        ServiceRole(f"{prefix}routing", reads=(auth,)),
    ]


def password_variable(role: ServiceRole, prefix: str = DEFAULT_ROLE_PREFIX) -> str:
    """Where `suanli dev db-roles` reads a role's password: ``SUANLI_<SERVICE>_PG_PASSWORD``."""
    return f"SUANLI_{role.role.removeprefix(prefix).upper()}_PG_PASSWORD"


def producer(context: str, topic: str) -> str:
    """The process that writes `topic`'s records of bounded context `context`."""
    return PRODUCER_OF_TOPIC.get(topic) or PRODUCER_OF_CONTEXT[context]


def _produced_by(process: str) -> tuple[str, ...]:
    topics = {spec.topic for spec in EVENTS.values() if producer(spec.context, spec.topic) == process}
    return tuple(sorted(topics - set(COMMAND_TOPICS)))


def _stream_processor(
    name: str,
    settings: type[MeteringSettings | RoutingSettings],
    touches: set[str],
    internal: str,
    prefix: str,
) -> KafkaUser:
    """A faust service: its app id is its consumer group and the prefix of its changelogs."""
    writes = _produced_by(name)
    # The group carries the topic prefix already; the changelogs' prefix gets it from `acl_bindings`.
    app_id = settings.model_construct(topic_prefix="", app_id="").group_id
    group = settings.model_construct(topic_prefix=prefix, app_id="").group_id
    return KafkaUser(
        name,
        writes=writes,
        reads=tuple(sorted(touches - set(writes) - {internal})),
        internal=(app_id, internal),
        groups=(group,),
        creates=tuple(sorted(touches)),
    )


def kafka_users(prefix: str = DEFAULT_USER_PREFIX, topic_prefix: str = "") -> list[KafkaUser]:
    """The SASL user of every process, with the topics it writes and reads and its consumer groups."""
    metering_touches = {t.name for t in MeteringTopics.specs()}
    routing_touches = {t.name for t in RoutingTopics.specs()}
    scheduling_reads = (*VIEW_TOPICS, *LEADER_TOPICS, *COMMAND_TOPICS)
    scheduling_writes = _produced_by("scheduling")
    billing_writes = _produced_by("billing")
    # Serving asks the scheduler for its replicas on the command topic, like an upstream system.
    serving_writes = (*_produced_by("serving"), *COMMAND_TOPICS)
    serving_reads = (*SERVING_INPUTS, SERVING_LOAD, REPLIES)
    users = [
        KafkaUser(
            "agent",
            # Agents publish their replicas' load: a simulated fleet's (sensing's adapters.replicas) and
            # the load scraped from a real node's model servers (adapters.replica_scrape).
            writes=tuple(sorted({*_produced_by("agent"), SERVING_LOAD})),
            reads=tuple(t.name for t in CONSUMED_TOPICS),
            groups=(AGENT_GROUP_PREFIX,),
            creates=tuple(t.name for t in (*PRODUCED_TOPICS, *CONSUMED_TOPICS)),
        ),
        # Metering re-keys every task fact into its own topic; routing re-keys probes by region pair.
        _stream_processor("metering", MeteringSettings, metering_touches, FACTS.name, topic_prefix),
        _stream_processor("routing", RoutingSettings, routing_touches, PROBES.name, topic_prefix),
        KafkaUser(
            "scheduling",
            writes=scheduling_writes,
            reads=scheduling_reads,
            # Its groups: scheduling (reports), scheduling-commands, scheduling-view-<instance>.
            groups=("scheduling",),
            creates=tuple(sorted({*scheduling_reads, *scheduling_writes})),
        ),
        KafkaUser(
            "billing",
            writes=billing_writes,
            reads=BILLING_INPUTS,
            # The stock group (not this shell's SUANLI_BILLING_GROUP): deploy/kafka/acls.sh is committed.
            groups=(_setting(BillingSettings, "group", {}),),
            creates=tuple(sorted({*BILLING_INPUTS, *billing_writes})),
        ),
        KafkaUser(
            "serving",
            writes=serving_writes,
            reads=tuple(sorted(set(serving_reads))),
            # Its group, and each instance's own load-view group (serving-load-<id>).
            groups=(_setting(ServingSettings, "group", {}),),
            creates=tuple(sorted({*serving_reads, *serving_writes})),
        ),
        # A replica's load reporter (docs/serving.md): writes its service's load reports, reads nothing.
        KafkaUser("replica", writes=_produced_by("replica")),
        KafkaUser("auth", writes=_produced_by("auth"), creates=_produced_by("auth")),
        KafkaUser(UPSTREAM, writes=COMMAND_TOPICS, reads=(REPLIES,), groups=(f"{UPSTREAM}-",)),
    ]
    return [KafkaUser(f"{prefix}{u.name}", u.writes, u.reads, u.internal, u.groups, u.creates) for u in users]
