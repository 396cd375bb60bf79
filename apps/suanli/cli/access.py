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

from suanli.auth.ledger import DEFAULT_SCHEMA as AUTH_SCHEMA
from suanli.billing.entrypoints.service import INPUTS as BILLING_INPUTS
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.bus.acls import KafkaUser
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore.roles import ServiceRole
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.metering.entrypoints.topics import FACTS, MeteringTopics
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.entrypoints.topics import PROBES, RoutingTopics
from suanli.scheduling.entrypoints.app import COMMAND_TOPICS, LEADER_TOPICS, REPLIES, VIEW_TOPICS
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.sensing.adapters.bus import CONSUMED_TOPICS, PRODUCED_TOPICS
from suanli.sensing.entrypoints.settings import GROUP_PREFIX as AGENT_GROUP_PREFIX
from suanli.settings import ServiceSettings

DEFAULT_ROLE_PREFIX = "suanli_"
DEFAULT_USER_PREFIX = "suanli-"

# The process that produces each bounded context's events (suanli.contracts.catalogue.CONTEXTS): the node
# agent runs sensing and execution; the token ledger's outbox is relayed as the auth user.
PRODUCER_OF_CONTEXT: Mapping[str, str] = {
    "sensing": "agent",
    "execution": "agent",
    "metering": "metering",
    "routing": "routing",
    "scheduling": "scheduling",
    "billing": "billing",
    "auth": "auth",
}
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
        ServiceRole(f"{prefix}routing", reads=(auth,)),
    ]


def password_variable(role: ServiceRole, prefix: str = DEFAULT_ROLE_PREFIX) -> str:
    """Where `suanli dev db-roles` reads a role's password: ``SUANLI_<SERVICE>_PG_PASSWORD``."""
    return f"SUANLI_{role.role.removeprefix(prefix).upper()}_PG_PASSWORD"


def _produced_by(process: str) -> tuple[str, ...]:
    topics = {spec.topic for spec in EVENTS.values() if PRODUCER_OF_CONTEXT[spec.context] == process}
    return tuple(sorted(topics - set(COMMAND_TOPICS)))


def kafka_users(prefix: str = DEFAULT_USER_PREFIX, topic_prefix: str = "") -> list[KafkaUser]:
    """The SASL user of every process, with the topics it writes and reads and its consumer groups."""
    metering_touches = {t.name for t in MeteringTopics.specs()}
    routing_touches = {t.name for t in RoutingTopics.specs()}
    metering_writes = _produced_by("metering")
    routing_writes = _produced_by("routing")
    # Faust names its changelogs after the app id, which is the consumer group: the group carries the
    # topic prefix already, the topic-name prefix gets it from `acl_bindings`.
    metering_app = MeteringSettings.model_construct(topic_prefix="", app_id="").group_id
    routing_app = RoutingSettings.model_construct(topic_prefix="", app_id="").group_id
    metering_group = MeteringSettings.model_construct(topic_prefix=topic_prefix, app_id="").group_id
    routing_group = RoutingSettings.model_construct(topic_prefix=topic_prefix, app_id="").group_id
    scheduling_reads = (*VIEW_TOPICS, *LEADER_TOPICS, *COMMAND_TOPICS)
    scheduling_writes = _produced_by("scheduling")
    billing_writes = _produced_by("billing")
    users = [
        KafkaUser(
            "agent",
            writes=_produced_by("agent"),
            reads=tuple(t.name for t in CONSUMED_TOPICS),
            groups=(AGENT_GROUP_PREFIX,),
            creates=tuple(t.name for t in (*PRODUCED_TOPICS, *CONSUMED_TOPICS)),
        ),
        KafkaUser(
            "metering",
            writes=metering_writes,
            reads=tuple(sorted(metering_touches - set(metering_writes) - {FACTS.name})),
            # The faust app's changelogs and its re-keyed facts topic; its group is the app id.
            internal=(metering_app, FACTS.name),
            groups=(metering_group,),
            creates=tuple(sorted(metering_touches)),
        ),
        KafkaUser(
            "routing",
            writes=routing_writes,
            reads=tuple(sorted(routing_touches - set(routing_writes) - {PROBES.name})),
            internal=(routing_app, PROBES.name),
            groups=(routing_group,),
            creates=tuple(sorted(routing_touches)),
        ),
        KafkaUser(
            "scheduling",
            writes=scheduling_writes,
            reads=scheduling_reads,
            groups=("scheduling",),
            creates=tuple(sorted({*scheduling_reads, *scheduling_writes})),
        ),
        KafkaUser(
            "billing",
            writes=billing_writes,
            reads=BILLING_INPUTS,
            groups=(_setting(BillingSettings, "group", {}),),
            creates=tuple(sorted({*BILLING_INPUTS, *billing_writes})),
        ),
        KafkaUser("auth", writes=_produced_by("auth"), creates=_produced_by("auth")),
        KafkaUser(UPSTREAM, writes=COMMAND_TOPICS, reads=(REPLIES,), groups=(f"{UPSTREAM}-",)),
    ]
    return [KafkaUser(f"{prefix}{u.name}", u.writes, u.reads, u.internal, u.groups, u.creates) for u in users]
