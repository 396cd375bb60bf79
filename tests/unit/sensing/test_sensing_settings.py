"""The agent's settings: environment, flags, the docs table, and `suanli agent` reading them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from suanli.cli.main import app as root_app
from suanli.sensing.adapters.probes import Peer
from suanli.sensing.domain.links import SiteRef
from suanli.sensing.entrypoints.settings import SensingSettings
from suanli.settings import SettingsError


def test_platform_wide_variables_and_flags_over_the_environment() -> None:
    env = {
        "SUANLI_KAFKA_BOOTSTRAP": "kafka-1:9092,kafka-2:9092",
        "SUANLI_TOPIC_PREFIX": "e2e",
        "SUANLI_SENSING_INTERVAL_S": "2",
        "SUANLI_SENSING_LABELS": "pool=training, rack=3",
        "SUANLI_SENSING_PEERS": "10.0.0.2:7000=frankfurt/fra1,10.0.0.3:7000",
    }
    settings = SensingSettings.load(env, interval_s=None, grace_s=3.0)
    assert settings.bootstrap == "kafka-1:9092,kafka-2:9092" and settings.topic_prefix == "e2e"
    assert settings.interval_s == 2.0 and settings.grace_s == 3.0  # None: not given, the env stands
    assert settings.labels == {"pool": "training", "rack": "3"}
    assert settings.peers == (
        Peer("10.0.0.2", 7000, SiteRef("frankfurt", "fra1")),
        Peer("10.0.0.3", 7000, SiteRef("10.0.0.3:7000", "10.0.0.3:7000")),
    )
    flagged = SensingSettings.load(env, labels=["gpu=h100"], peers=[], interval_s=1.0)
    assert flagged.labels == {"gpu": "h100"} and flagged.peers == () and flagged.interval_s == 1.0


def test_identity_falls_back_to_the_host_name_and_the_region() -> None:
    identity = SensingSettings.load({"SUANLI_SENSING_REGION": "washington-dc"}).identity("box-7")
    assert (identity.node_id, identity.region, identity.zone, identity.site) == (
        "box-7",
        "washington-dc",
        "washington-dc-a",
        "washington-dc-1",
    )


@pytest.mark.parametrize(
    ("env", "flags", "variable"),
    [
        ({"SUANLI_SENSING_INTERVAL_S": "0"}, {}, "SUANLI_SENSING_INTERVAL_S"),
        ({"SUANLI_SENSING_PROBE_PORT": "http"}, {}, "SUANLI_SENSING_PROBE_PORT"),
        ({}, {"labels": ["no-equals"]}, "SUANLI_SENSING_LABELS"),
        ({"SUANLI_SENSING_PEERS": "nohost"}, {}, "SUANLI_SENSING_PEERS"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], flags: dict[str, Any], variable: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(variable)):
        SensingSettings.load(env, **flags)


def _printed(output: str) -> list[dict[str, Any]]:
    """The JSON objects `--once` printed, skipping any other line."""
    decoder = json.JSONDecoder()
    objects, at = [], output.find("{")
    while at != -1:
        obj, end = decoder.raw_decode(output, at)
        objects.append(obj)
        at = output.find("{", end)
    return objects


def test_the_agent_command_reads_the_environment_and_its_flags() -> None:
    env = {
        "SUANLI_SENSING_NODE_ID": "lab-1",
        "SUANLI_SENSING_REGION": "frankfurt",
        "SUANLI_SENSING_INTERVAL_S": "2",
        "SUANLI_SENSING_LABELS": "pool=a",
    }
    result = CliRunner().invoke(root_app, ["agent", "--once", "--site", "sh9"], env=env)
    assert result.exit_code == 0, result.output
    registered, snapshot = _printed(result.stdout)
    assert registered["event"] == "NodeRegistered" and snapshot["event"] == "NodeSnapshot"
    record = snapshot["record"]
    assert (record["node_id"], record["region"], record["zone"], record["site"]) == (
        "lab-1",
        "frankfurt",
        "frankfurt-a",
        "sh9",
    )
    assert record["report_interval_ms"] == 2000 and record["labels"]["pool"] == "a"

    result = CliRunner().invoke(root_app, ["agent", "--once", "--interval", "3"], env=env)
    assert result.exit_code == 0, result.output
    assert _printed(result.stdout)[1]["record"]["report_interval_ms"] == 3000


def test_the_agent_command_refuses_a_bad_setting_as_a_usage_error() -> None:
    result = CliRunner().invoke(root_app, ["agent", "--once"], env={"SUANLI_SENSING_INTERVAL_S": "0"})
    assert result.exit_code == 2 and "SUANLI_SENSING_INTERVAL_S" in result.output
