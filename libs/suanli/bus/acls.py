"""Kafka ACLs as data: which user may do what on which topic and consumer group (docs/security.md, "Kafka").

A deployment with SASL users gives every process its own user and allows it exactly the topics it
produces and consumes; `acl_bindings` turns that per-user description into ACL entries (allow only: the
brokers deny whatever no entry allows once an authorizer is configured), and `kafka_acls_commands`
writes them as ``kafka-acls.sh`` invocations for a cluster's init step. Which user writes which topic is
not written here: the application layer derives it from the topic catalogue (each event's context) and
the services' own topic lists (`suanli dev kafka-acls`), so the ACLs follow the code.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from suanli.contracts.catalogue import dlq_topic, qualified

__all__ = [
    "DEFAULT_USER_PREFIX",
    "Acl",
    "KafkaUser",
    "Pattern",
    "Resource",
    "acl_bindings",
    "kafka_acls_commands",
    "password_variable",
    "scram_user_commands",
]


DEFAULT_USER_PREFIX = "suanli-"  # suanli-scheduling, suanli-agent, ...


class Resource(StrEnum):
    """The Kafka resource types the platform's ACLs name."""

    TOPIC = "topic"
    GROUP = "group"


class Pattern(StrEnum):
    """How an ACL's resource name matches: exactly, or every name starting with it."""

    LITERAL = "literal"
    PREFIXED = "prefixed"


@dataclass(frozen=True, slots=True)
class KafkaUser:
    """One SASL user and what it does: catalogue topics it writes and reads, groups and internal topics.

    ``reads``: topics it consumes (it may also dead-letter them, so it writes their ``.dlq``).
    ``internal``: prefixes of topics only this user has (faust changelogs, re-keyed streams): all rights.
    ``groups``: prefixes of the consumer groups it joins. ``creates``: topics it may create when missing
    (a service ensures every topic it touches at start; creating changes nothing once they exist).
    """

    name: str
    writes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    internal: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    creates: tuple[str, ...] = ()

    @property
    def principal(self) -> str:
        """The principal the brokers see for this SASL/SCRAM user."""
        return f"User:{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One allow entry: ``principal`` may ``operation`` the ``resource`` named (or prefixed) ``name``."""

    principal: str
    resource: Resource
    pattern: Pattern
    name: str
    operation: str  # Kafka's operation name: Read, Write, Describe, Create, All


def acl_bindings(users: Iterable[KafkaUser], prefix: str = "") -> list[Acl]:
    """Every allow entry the users need, topic names under the deployment's ``prefix``, sorted, unique."""
    found: set[Acl] = set()
    topic, group = Resource.TOPIC, Resource.GROUP
    literal, prefixed = Pattern.LITERAL, Pattern.PREFIXED
    for user in users:
        wanted: list[tuple[Resource, Pattern, str, tuple[str, ...]]] = []
        for name in user.writes:
            wanted.append((topic, literal, qualified(name, prefix), ("Write", "Describe")))
        for name in user.reads:
            physical = qualified(name, prefix)
            wanted.append((topic, literal, physical, ("Read", "Describe")))
            wanted.append((topic, literal, dlq_topic(physical), ("Write", "Describe")))
        for name in user.creates:
            physical = qualified(name, prefix)
            wanted += [(topic, literal, n, ("Create", "Describe")) for n in (physical, dlq_topic(physical))]
        wanted += [(topic, prefixed, qualified(name, prefix), ("All",)) for name in user.internal]
        wanted += [(group, prefixed, name, ("Read", "Describe")) for name in user.groups]
        found.update(Acl(user.principal, r, p, n, op) for r, p, n, ops in wanted for op in ops)
    return sorted(found)


def password_variable(user: str, prefix: str = DEFAULT_USER_PREFIX) -> str:
    """The variable holding ``user``'s SCRAM password: ``SUANLI_KAFKA_<NAME>_PASSWORD``."""
    return f"SUANLI_KAFKA_{user.removeprefix(prefix).upper().replace('-', '_')}_PASSWORD"


def scram_user_commands(
    users: Iterable[KafkaUser],
    bootstrap: str,
    command_config: str,
    mechanism: str = "SCRAM-SHA-512",
    tool: str = "kafka-configs.sh",
    prefix: str = DEFAULT_USER_PREFIX,
) -> list[str]:
    """Shell lines setting each user's SCRAM credential from its `password_variable`.

    The password stays in the environment of the shell that runs them (never in the lines); a user whose
    variable is unset or empty is skipped, so it cannot log in (its ACLs grant nothing to anyone else).
    """
    lines = []
    for user in users:
        variable = password_variable(user.name, prefix)
        argv = shlex.join(
            [tool, "--bootstrap-server", bootstrap, "--command-config", command_config, "--alter"]
        )
        config = f'"{mechanism}=[password=${{{variable}}}]"'
        lines.append(
            f'if [ -n "${{{variable}:-}}" ]; then {argv} --add-config {config}'
            f" --entity-type users --entity-name {shlex.quote(user.name)}; fi"
        )
    return lines


def kafka_acls_commands(
    acls: Sequence[Acl], bootstrap: str, command_config: str, tool: str = "kafka-acls.sh"
) -> list[str]:
    """Shell lines adding ``acls`` with Kafka's own tool: one per principal, pattern and set of operations.

    Each line names every resource that shares them (the tool takes ``--topic`` and ``--group`` more
    than once), since each run starts a JVM. ``command_config``: the tool's client properties (SASL_SSL
    as a super user). Adding an ACL that exists changes nothing, so the lines may run on every start.
    """
    operations: dict[tuple[str, Resource, Pattern, str], set[str]] = {}
    for acl in acls:
        operations.setdefault((acl.principal, acl.resource, acl.pattern, acl.name), set()).add(acl.operation)
    grouped: dict[tuple[str, Pattern, tuple[str, ...]], list[tuple[Resource, str]]] = {}
    for (principal, resource, pattern, name), allowed in operations.items():
        grouped.setdefault((principal, pattern, tuple(sorted(allowed))), []).append((resource, name))
    lines = []
    for (principal, pattern, ops), resources in grouped.items():
        argv = [tool, "--bootstrap-server", bootstrap, "--command-config", command_config, "--add"]
        argv += ["--allow-principal", principal, "--resource-pattern-type", pattern.value]
        for resource, name in sorted(resources):
            argv += [f"--{resource.value}", name]
        for operation in ops:
            argv += ["--operation", operation]
        lines.append(shlex.join(argv))
    return lines
