"""The Kafka ACLs generated from the topic catalogue, as data; the script compose runs; the broker entrypoint.

No broker with an authorizer runs here (Tansu has none and Apache Kafka is not available), so these hold
the generated entries to the rules of docs/security.md; docs/operations.md says what is not verified.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.bus.acls import Acl, KafkaUser, Pattern, Resource, acl_bindings, kafka_acls_commands
from suanli.cli import access
from suanli.cli.main import app
from suanli.contracts.catalogue import DLQ_SUFFIX, EVENTS, TOPICS_BY_NAME

REPO_ROOT = Path(__file__).resolve().parents[3]
KAFKA = REPO_ROOT / "deploy" / "kafka"
SENSING_CONTEXTS = {"sensing", "execution"}


@pytest.fixture(scope="module")
def acls() -> list[Acl]:
    return acl_bindings(access.kafka_users())


def _who(acls: list[Acl], operation: str) -> dict[str, set[str]]:
    """Literal topic -> the principals allowed ``operation`` on it."""
    found: dict[str, set[str]] = defaultdict(set)
    for acl in acls:
        if acl.resource is Resource.TOPIC and acl.pattern is Pattern.LITERAL and acl.operation == operation:
            found[acl.name].add(acl.principal.removeprefix("User:"))
    return found


def test_only_the_scheduler_writes_placements(acls: list[Acl]) -> None:
    assert _who(acls, "Write")["placements"] == {"suanli-scheduling"}
    # ...and no prefixed or wildcard entry lets anyone else in.
    assert not any(a.pattern is Pattern.PREFIXED and "placements".startswith(a.name) for a in acls)
    assert not any(a.name == "*" for a in acls)


def test_agents_write_only_their_sensing_topics_and_read_only_placements(acls: list[Acl]) -> None:
    agent = [a for a in acls if a.principal == "User:suanli-agent"]
    sensing = {s.topic for s in EVENTS.values() if s.context in SENSING_CONTEXTS}
    writes = {a.name for a in agent if a.operation == "Write"}
    # Its own topics, the dead-letter topic of the placements it refuses, and the load reports of the
    # replicas a simulated fleet hosts.
    assert writes == sensing | {"placements.dlq", "services.load"}
    assert {a.name for a in agent if a.operation == "Read"} == {"placements", "sensing-"}
    assert {a.operation for a in agent} <= {"Read", "Write", "Describe", "Create"}
    assert not any(a.pattern is Pattern.PREFIXED and a.resource is Resource.TOPIC for a in agent)


def test_every_catalogue_topic_has_exactly_its_producer_as_writer(acls: list[Acl]) -> None:
    writers = _who(acls, "Write")
    for topic in {s.topic for s in EVENTS.values()}:
        contexts = {s.context for s in EVENTS.values() if s.topic == topic}
        expected = {f"suanli-{access.producer(c, topic)}" for c in contexts}
        if topic == "jobs.commands":
            expected = {"suanli-upstream", "suanli-serving"}  # serving asks for its replicas there
        if topic == "services.load":
            expected.add("suanli-agent")  # a simulated fleet's hosted replicas report there
        assert writers[topic] == expected, topic


def test_each_user_reads_only_the_topics_it_consumes_and_writes_dead_letters_only_of_those(
    acls: list[Acl],
) -> None:
    users = {u.name: u for u in access.kafka_users()}
    readers = _who(acls, "Read")
    for topic, principals in readers.items():
        for user in principals:
            assert topic in users[user].reads, (user, topic)
    for topic, principals in _who(acls, "Write").items():
        if topic.endswith(DLQ_SUFFIX):
            for user in principals:
                assert topic.removesuffix(DLQ_SUFFIX) in users[user].reads, (user, topic)
    # Every topic a service consumes is written by someone (no ACL for a topic nobody fills).
    written = set(_who(acls, "Write"))
    for user in users.values():
        assert set(user.reads) <= written, user.name
    # The billing ledger is read by no other service through Kafka but the ones that consume it.
    assert "billing.events" not in readers


def test_consumer_groups_and_internal_topics_are_each_services_own(acls: list[Acl]) -> None:
    prefixed = [a for a in acls if a.pattern is Pattern.PREFIXED]
    by_name: dict[tuple[Resource, str], set[str]] = defaultdict(set)
    for acl in prefixed:
        by_name[(acl.resource, acl.name)].add(acl.principal)
    assert all(len(principals) == 1 for principals in by_name.values()), by_name
    # No prefix of one user covers another's group or internal topic.
    names = sorted({name for _, name in by_name})
    for a in names:
        for b in names:
            if a != b:
                assert not b.startswith(a), (a, b)
    # "All" only on a service's internal topics, never on a catalogue topic.
    for acl in prefixed:
        if acl.operation == "All":
            assert not any(t.startswith(acl.name) for t in TOPICS_BY_NAME), acl


def test_the_deployment_prefix_applies_to_topics_and_groups() -> None:
    users = access.kafka_users(topic_prefix="prod")
    acls = acl_bindings(users, "prod")
    topics = {a.name for a in acls if a.resource is Resource.TOPIC}
    assert topics and all(t.startswith("prod.") for t in topics)
    groups = {a.name for a in acls if a.resource is Resource.GROUP}
    assert "prod.suanli-metering" in groups and "prod.suanli-routing" in groups


def test_commands_group_resources_that_share_principal_and_operations() -> None:
    user = KafkaUser("u", writes=("a", "b"))
    lines = kafka_acls_commands(acl_bindings([user]), "k:9092", "/c")
    assert lines == [
        "kafka-acls.sh --bootstrap-server k:9092 --command-config /c --add --allow-principal User:u "
        "--resource-pattern-type literal --topic a --topic b --operation Describe --operation Write"
    ]


def test_the_script_compose_runs_is_the_generators_output() -> None:
    result = CliRunner().invoke(app, ["dev", "kafka-acls"])
    assert result.exit_code == 0, result.output
    assert (KAFKA / "acls.sh").read_text(encoding="utf-8") == result.output, (
        "deploy/kafka/acls.sh is stale: `suanli dev kafka-acls > deploy/kafka/acls.sh`"
    )


def test_the_json_output_is_the_acl_set() -> None:
    result = CliRunner().invoke(app, ["dev", "kafka-acls", "--json"])
    rows = json.loads(result.output)
    expected = acl_bindings(access.kafka_users())
    assert [(r["principal"], r["name"], r["operation"]) for r in rows] == [
        (a.principal, a.name, a.operation) for a in expected
    ]


def test_the_script_sets_passwords_from_the_environment_only_for_users_given_one(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    for tool in ("kafka-configs.sh", "kafka-acls.sh"):
        script = tools / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    text = (KAFKA / "acls.sh").read_text(encoding="utf-8").replace("/opt/kafka/bin", str(tools))
    env = {"PATH": os.environ["PATH"], "SUANLI_KAFKA_SCHEDULING_PASSWORD": "s3cret"}
    subprocess.run(["sh", "-c", text], env=env, check=True)
    lines = calls.read_text().splitlines()
    configs = [line for line in lines if line.startswith("kafka-configs.sh")]
    assert len(configs) == 1 and "SCRAM-SHA-512=[password=s3cret]" in configs[0]
    assert "--entity-name suanli-scheduling" in configs[0]
    assert sum(line.startswith("kafka-acls.sh") for line in lines) == len(
        kafka_acls_commands(acl_bindings(access.kafka_users()), "b", "c")
    )


def test_the_broker_entrypoint_writes_sasl_ssl_settings_and_formats_once(tmp_path: Path) -> None:
    home, tls, logs = tmp_path / "kafka", tmp_path / "tls", tmp_path / "data"
    (home / "bin").mkdir(parents=True)
    tls.mkdir()
    logs.mkdir()
    for name in ("ca.pem", "server.pem", "server-key.pem"):
        (tls / name).write_text(f"{name}\n")
    formats = tmp_path / "formats"
    fakes = {
        # Records the call and formats as the real tool does (meta.properties in the log directory).
        "kafka-storage.sh": f'echo "$*" >> {formats}\ntouch {logs}/meta.properties\n',
        "kafka-server-start.sh": 'cat "$1"\n',
    }
    for name, body in fakes.items():
        (home / "bin" / name).write_text(f"#!/bin/sh\n{body}")
        (home / "bin" / name).chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "SUANLI_KAFKA_HOME": str(home),
        "SUANLI_KAFKA_WORK": str(tmp_path / "work"),
        "SUANLI_TLS_DIR": str(tls),
        "SUANLI_KAFKA_ADMIN_PASSWORD": "adminpw",
        "CLUSTER_ID": "abc",
        "KAFKA_LOG_DIRS": str(logs),
        "KAFKA_NODE_ID": "1",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL",
        "KAFKA_LISTENER_NAME_CONTROLLER_SASL_ENABLED_MECHANISMS": "PLAIN",
        "KAFKA_HEAP_OPTS": "-Xmx1g",
    }
    script = KAFKA / "suanli-kafka.sh"
    first = subprocess.run(
        ["bash", str(script), "broker"], env=env, capture_output=True, text=True, check=True
    )
    properties = dict(line.split("=", 1) for line in first.stdout.splitlines())
    assert properties["node.id"] == "1"
    assert properties["listener.security.protocol.map"] == "CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL"
    assert properties["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert properties["log.dirs"] == str(logs)
    assert "heap.opts" not in properties
    assert properties["ssl.keystore.type"] == "PEM"
    assert 'password="adminpw"' in properties["listener.name.internal.scram-sha-512.sasl.jaas.config"]
    keystore = Path(properties["ssl.keystore.location"]).read_text()
    assert keystore == "server-key.pem\nserver.pem\n"
    admin = (tmp_path / "work" / "admin.properties").read_text()
    assert "security.protocol=SASL_SSL" in admin and "sasl.mechanism=SCRAM-SHA-512" in admin
    subprocess.run(["bash", str(script), "broker"], env=env, capture_output=True, check=True)
    (call,) = formats.read_text().splitlines()  # formatted on the first start only
    assert "--cluster-id abc" in call and "SCRAM-SHA-512=[name=admin,password=adminpw]" in call
