"""Static checks of the production stack: docker-compose.yml and everything it mounts from deploy/.

No Docker engine is available where tests run, so these tests hold the files to what the engine and
each component would need: services present, mounted paths present, configs self-consistent, and
dashboards written against the metric catalogue the services export.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli import REPO_ROOT
from suanli.telemetry.names import METRICS, METRICS_BY_NAME, METRICS_PORTS

COMPOSE = REPO_ROOT / "docker-compose.yml"
DEPLOY = REPO_ROOT / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    return load_yaml(DEPLOY / "prometheus" / "prometheus.yml")


def test_infrastructure_services_exist(compose: dict[str, Any]) -> None:
    expected = {"kafka-1", "kafka-2", "kafka-3", "postgres", "prometheus", "grafana", "otel-collector"}
    assert expected <= set(compose["services"])


def test_kafka_is_a_three_node_kraft_quorum(compose: dict[str, Any]) -> None:
    nodes = {name: compose["services"][name] for name in ("kafka-1", "kafka-2", "kafka-3")}
    voters = {svc["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"] for svc in nodes.values()}
    assert voters == {"1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"}
    ids = set()
    for name, svc in nodes.items():
        env = svc["environment"]
        assert svc["image"].startswith("apache/kafka:")
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        ids.add(int(env["KAFKA_NODE_ID"]))
        # Each node advertises its own compose hostname to its peers.
        assert f"INTERNAL://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
        listeners = {entry.split("://")[0] for entry in env["KAFKA_LISTENERS"].split(",")}
        mapped = {entry.split(":")[0] for entry in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")}
        assert listeners <= mapped
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners
        assert int(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == 3
        assert any(v.endswith(":/var/lib/kafka/data") for v in svc["volumes"])
    assert ids == {1, 2, 3}
    # One host port per node, or the external listeners would collide.
    host_ports = [p.split(":")[0] for svc in nodes.values() for p in svc["ports"]]
    assert len(host_ports) == len(set(host_ports)) == 3


def test_postgres_has_volume_and_healthcheck(compose: dict[str, Any]) -> None:
    pg = compose["services"]["postgres"]
    assert pg["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert any(v.split(":")[0] in compose["volumes"] for v in pg["volumes"])


def _host_paths(compose: dict[str, Any]) -> list[str]:
    paths: list[str] = []
    for svc in compose["services"].values():
        for volume in svc.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith(("./", "../", "/")):
                paths.append(source)
    for section in ("configs", "secrets"):
        for item in (compose.get(section) or {}).values():
            if "file" in item:
                paths.append(item["file"])
    return paths


def test_every_mounted_host_path_exists(compose: dict[str, Any]) -> None:
    paths = _host_paths(compose)
    assert paths, "expected config files mounted from deploy/"
    missing = [p for p in paths if not (REPO_ROOT / p).exists()]
    assert missing == []


def test_named_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = {
        v.split(":")[0]
        for svc in compose["services"].values()
        for v in svc.get("volumes", [])
        if isinstance(v, str) and not v.startswith((".", "/"))
    }
    assert used <= declared


def test_prometheus_scrapes_compose_services_or_documented_ports(
    compose: dict[str, Any], prometheus: dict[str, Any]
) -> None:
    services = set(compose["services"])
    documented = {f"{name}:{port}" for name, port in METRICS_PORTS.items()}
    targets = [
        target
        for job in prometheus["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]
    assert targets
    for target in targets:
        host, _, port = target.rpartition(":")
        assert port.isdigit(), target
        assert host in services or host == "localhost" or target in documented, target
    # Every Suanli service is scraped on its catalogued port.
    assert documented <= set(targets)


def test_prometheus_job_names_are_unique(prometheus: dict[str, Any]) -> None:
    names = [job["job_name"] for job in prometheus["scrape_configs"]]
    assert len(names) == len(set(names))


def test_grafana_provisioning_points_at_mounted_dashboards(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    providers = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "suanli.yaml")["providers"]
    for provider in providers:
        assert mounts.get(provider["options"]["path"]) == "./deploy/grafana/dashboards"
    datasources = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")
    [ds] = datasources["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["url"] == "http://prometheus:9090"


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        out.extend(panel.get("panels", []))
        if panel["type"] != "row":
            out.append(panel)
    return out


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_panels_all_query_something(path: Path) -> None:
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    panels = _panels(dashboard)
    assert panels
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"]["uid"] == "prometheus", panel["title"]


_SUFFIXES = ("_bucket", "_count", "_sum")


def _metric_names(expr: str) -> set[str]:
    names = set()
    for token in re.findall(r"\bsuanli_[a-z0-9_]+", expr):
        for suffix in _SUFFIXES:
            if token.endswith(suffix) and token.removesuffix(suffix) in METRICS_BY_NAME:
                token = token.removesuffix(suffix)
        names.add(token)
    return names


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_uses_only_catalogued_metrics(path: Path) -> None:
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in _panels(dashboard) for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard.get("templating", {}).get("list", [])]
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used - set(METRICS_BY_NAME) == set()


def test_scheduling_overview_covers_the_scheduling_catalogue() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "scheduling-overview.json").read_text())
    used = set().union(*(_metric_names(t["expr"]) for p in _panels(dashboard) for t in p["targets"]))
    assert {m.name for m in METRICS} <= used


def test_catalogued_metrics_are_documented() -> None:
    doc = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert [m.name for m in METRICS if f"`{m.name}`" not in doc] == []
    for name, port in METRICS_PORTS.items():
        assert re.search(rf"\b{name}\b.*\b{port}\b", doc), name


def test_otel_collector_pipelines_reference_defined_components(compose: dict[str, Any]) -> None:
    config = load_yaml(DEPLOY / "otel" / "collector.yaml")
    pipelines = config["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in (config.get(kind) or {}), f"{name}: {kind} {component} undefined"
        assert pipeline["receivers"] and pipeline["exporters"], name
    assert "prometheus" in pipelines["metrics"]["exporters"]
    assert "debug" in pipelines["traces"]["exporters"]
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]
    # Ports the collector listens on are published by compose.
    published = {p.split(":")[-1].split("/")[0] for p in compose["services"]["otel-collector"]["ports"]}
    assert {"4318", "8889"} <= published
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    assert config["exporters"]["prometheus"]["endpoint"].endswith(":8889")
