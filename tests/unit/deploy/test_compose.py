"""Static checks of the production stack: docker-compose.yml and everything it mounts from deploy/.

No Docker engine is available where tests run, so these tests hold the files to what the engine and
each component would need: services present, mounted paths present, configs self-consistent, and
dashboards written against the metric catalogue the services export.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from suanli.data import data_path
from suanli.telemetry.names import METRICS, METRICS_BY_NAME, METRICS_PORTS

REPO_ROOT = Path(__file__).resolve().parents[3]


COMPOSE = REPO_ROOT / "docker-compose.yml"
DEPLOY = data_path("deploy")
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


# Mounted from a directory each operator creates (`suanli dev certs`, docker-compose.yml's header): the
# certificates are secrets, not repository files.
TLS_MOUNT = "${SUANLI_COMPOSE_TLS:-./.suanli/compose-tls}:/etc/suanli/tls:ro"


def _host_paths(compose: dict[str, Any]) -> list[str]:
    paths: list[str] = []
    for svc in compose["services"].values():
        for volume in svc.get("volumes", []):
            if volume == TLS_MOUNT:
                continue
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
        if isinstance(v, str) and not v.startswith((".", "/")) and v != TLS_MOUNT
    }
    assert used <= declared


def _targets(prometheus: dict[str, Any]) -> list[str]:
    return [
        target
        for job in prometheus["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]


def test_every_scrape_target_names_a_compose_service(
    compose: dict[str, Any], prometheus: dict[str, Any]
) -> None:
    services = set(compose["services"])
    targets = _targets(prometheus)
    assert targets
    for target in targets:
        host, _, port = target.rpartition(":")
        assert port.isdigit(), target
        assert host in services or host == "localhost", target


# Compose service → the service it runs (suanli.telemetry.names.METRICS_PORTS): the agents are `fleet`.
COMPOSE_NAMES = {
    "scheduling": "scheduling",
    "metering": "metering",
    "routing": "routing",
    "billing": "billing",
    "serving": "serving",
    "fleet": "sensing",
}


def test_prometheus_scrapes_every_suanli_service_on_its_catalogued_port(
    compose: dict[str, Any], prometheus: dict[str, Any]
) -> None:
    # A Suanli service exports /metrics exactly when compose gives it SUANLI_METRICS_PORT.
    exporting = {
        name: int(svc["environment"]["SUANLI_METRICS_PORT"])
        for name, svc in _suanli_services(compose).items()
        if "SUANLI_METRICS_PORT" in svc["environment"]
    }
    assert set(COMPOSE_NAMES) == set(exporting)
    assert {name: METRICS_PORTS[COMPOSE_NAMES[name]] for name in exporting} == exporting
    targets = set(_targets(prometheus))
    assert {f"{name}:{port}" for name, port in exporting.items()} <= targets
    # Every catalogued port that is scraped belongs to a service that serves it (no permanent `up == 0`).
    catalogued = {f"{name}:{METRICS_PORTS[service]}" for name, service in COMPOSE_NAMES.items()}
    scraped_catalogued = {t for t in targets if t in catalogued}
    assert scraped_catalogued == {f"{name}:{port}" for name, port in exporting.items()}


# --- the Suanli services: image, environment, commands ----------------------------------------------

DOCKERFILE = REPO_ROOT / "Dockerfile"
SUANLI_SERVICES = {"scheduling", "metering", "routing", "billing", "serving", "fleet"}
# One-shot steps from the same image: `suanli dev db-roles` provisions the services' database roles,
# `auth-init` the token signing key.
ONE_SHOTS = {"db-roles", "auth-init"}
# Routing keeps no tables but reads the token ledger (authentication is on).
USES_POSTGRES = {"scheduling", "billing", "serving", "routing"}
BOOTSTRAP = "kafka-1:9092,kafka-2:9092,kafka-3:9092"


def _built(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services built from the repository's Dockerfile."""
    return {
        name: svc
        for name, svc in compose["services"].items()
        if svc.get("build") in (".", "./") or (svc.get("build") or {}).get("context") in (".", "./")
    }


def _suanli_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The long-running Suanli processes (not the one-shot steps)."""
    return {name: svc for name, svc in _built(compose).items() if name not in ONE_SHOTS}


def test_the_platform_services_are_built_from_the_dockerfile(compose: dict[str, Any]) -> None:
    assert set(_built(compose)) == SUANLI_SERVICES | ONE_SHOTS
    services = _suanli_services(compose)
    commands = {name: svc["command"] for name, svc in services.items()}
    assert commands["scheduling"][:2] == ["serve", "scheduling"]
    assert commands["metering"][:2] == ["serve", "metering"]
    assert commands["billing"][:2] == ["serve", "billing"]
    assert commands["routing"][:2] == ["serve", "routing"]
    assert commands["serving"][:2] == ["serve", "serving"]
    assert commands["fleet"][:2] == ["agent", "--simulate"]
    # Another container can only reach a gRPC API that listens on every interface.
    for name in ("scheduling", "routing", "billing", "serving"):
        listen = commands[name][commands[name].index("--listen") + 1]
        assert listen.startswith("0.0.0.0:"), name
        assert any(p.endswith(":" + listen.rpartition(":")[2]) for p in services[name]["ports"]), name
    for name, svc in services.items():
        assert svc.get("restart") in {"unless-stopped", "always", "on-failure"}, name


def test_dockerfile_installs_the_project_as_a_package_and_runs_as_non_root() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    # The package holds every floor and its data (suanli.data), so the image needs no editable install.
    assert re.search(r"pip install (\S+ )*\.(\s|$)", text)
    assert not re.search(r"pip install (\S+ )*(-e|--editable)\b", text)
    assert any(line.startswith("COPY . /app") for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}
    assert 'ENTRYPOINT ["suanli"]' in lines
    ignored = set((REPO_ROOT / ".dockerignore").read_text(encoding="utf-8").split())
    assert {".git", ".venv", ".suanli", "out", "bench/results"} <= ignored
    assert ignored & {"__pycache__", "**/__pycache__"}


def test_suanli_services_have_the_environment_they_need(compose: dict[str, Any]) -> None:
    for name, svc in _suanli_services(compose).items():
        env = svc["environment"]
        assert env["SUANLI_KAFKA_BOOTSTRAP"] == BOOTSTRAP, name
        # Every bootstrap address is a compose broker's INTERNAL listener.
        for address in env["SUANLI_KAFKA_BOOTSTRAP"].split(","):
            host = address.split(":")[0]
            listeners = compose["services"][host]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
            assert f"INTERNAL://{address}" in listeners.split(","), (name, address)
        # Topics the service creates must survive min.insync.replicas=2.
        assert int(env["SUANLI_TOPIC_REPLICATION"]) == 3, name
        depends = svc["depends_on"]
        for broker in ("kafka-1", "kafka-2", "kafka-3"):
            assert depends[broker]["condition"] == "service_healthy", (name, broker)
        if name in USES_POSTGRES:
            # Its own role's DSN (test_every_service_has_its_own_database_role_and_kafka_user).
            assert env[f"SUANLI_{name.upper()}_PG_DSN"].endswith("@postgres:5432/suanli"), name
            assert depends["postgres"]["condition"] == "service_healthy", name
        if "SUANLI_METRICS_PORT" in env:
            assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://otel-collector:4318/v1/traces", name
            # Pushing metrics as well would count every series twice (docs/operations.md).
            assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env, name


def test_grpc_services_are_health_checked_on_the_port_they_listen_on(compose: dict[str, Any]) -> None:
    services = _suanli_services(compose)
    for name in ("scheduling", "routing", "billing", "serving"):
        command = services[name]["command"]
        port = command[command.index("--listen") + 1].rpartition(":")[2]
        check = " ".join(services[name]["healthcheck"]["test"])
        assert f"localhost:{port}" in check and "HealthStub" in check, name


def test_kafka_brokers_require_the_replication_the_services_use(compose: dict[str, Any]) -> None:
    for broker in ("kafka-1", "kafka-2", "kafka-3"):
        env = compose["services"][broker]["environment"]
        assert int(env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) == 3, broker
        assert int(env["KAFKA_MIN_INSYNC_REPLICAS"]) <= 3, broker


def test_every_file_a_service_command_names_exists(compose: dict[str, Any]) -> None:
    # The image holds the repository at /app (Dockerfile: COPY . /app).
    paths = [
        arg
        for svc in _suanli_services(compose).values()
        for arg in svc["command"]
        if isinstance(arg, str) and arg.startswith("/app/")
    ]
    assert len(paths) >= 3
    missing = [p for p in paths if not (REPO_ROOT / p.removeprefix("/app/")).is_file()]
    assert missing == []
    assert any(line.strip() == "COPY . /app" for line in DOCKERFILE.read_text(encoding="utf-8").splitlines())


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
    used = set().union(*(_metric_names(e) for e in _exprs(_load(path))))
    assert used - set(METRICS_BY_NAME) == set()


# One dashboard per area (issue 16): file stem → what it answers is in docs/operations.md, "Dashboards".
AREAS = ("overview", "scheduling", "capacity", "network", "inference", "billing", "bus")


def _load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every panel target's query and every template variable's query."""
    exprs = [t["expr"] for p in _panels(dashboard) for t in p["targets"]]
    return exprs + [v["query"]["query"] for v in dashboard["templating"]["list"]]


def test_one_dashboard_per_area_with_its_own_uid_and_tags() -> None:
    assert sorted(p.stem for p in DASHBOARDS) == sorted(AREAS)
    for path in DASHBOARDS:
        dashboard = _load(path)
        assert dashboard["uid"] == f"suanli-{path.stem}", path.name
        assert dashboard["tags"] == ["suanli", path.stem], path.name
        assert dashboard["title"].startswith("Suanli / "), path.name
        assert dashboard["description"].strip(), path.name
        # Each dashboard lists the others (Grafana's dashboard links by tag).
        assert {"type": "dashboards", "tags": ["suanli"]}.items() <= dashboard["links"][0].items(), path.name


def test_every_catalogued_metric_is_on_some_dashboard() -> None:
    used = {name for path in DASHBOARDS for expr in _exprs(_load(path)) for name in _metric_names(expr)}
    assert [m.name for m in METRICS if m.name not in used] == []


def test_grafana_opens_on_the_overview(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}[
        "/var/lib/grafana/dashboards/suanli"
    ]
    assert home == "/var/lib/grafana/dashboards/suanli/overview.json"
    assert (REPO_ROOT / mounted / "overview.json").is_file()


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_panels_have_unique_ids_and_fit_the_grid(path: Path) -> None:
    panels = _load(path)["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["title"].strip() and (panel["type"] == "row" or panel["description"].strip()), panel[
            "title"
        ]


_VARIABLE = re.compile(r"label_values\((?P<metric>suanli_\w+)(\{(?P<selector>[^}]*)\})?, (?P<label>\w+)\)")
_REFERENCE = re.compile(r"\$\{?(\w+)\}?")
# Grafana's own variables that panels may use.
_BUILTINS = {"__rate_interval", "__interval", "__range"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_template_variables_list_a_catalogued_label_and_are_used(path: Path) -> None:
    dashboard = _load(path)
    variables = dashboard["templating"]["list"]
    names = [v["name"] for v in variables]
    panel_exprs = [t["expr"] for p in _panels(dashboard) for t in p["targets"]]
    for i, variable in enumerate(variables):
        query = variable["query"]["query"]
        assert variable["definition"] == query, variable["name"]
        match = _VARIABLE.fullmatch(query)
        assert match, query
        [metric] = _metric_names(match["metric"])
        assert match["label"] in METRICS_BY_NAME[metric].labels, query
        # A variable filters panels (or a later variable's values); one that nothing reads is clutter.
        later = [v["query"]["query"] for v in variables[i + 1 :]]
        assert any(variable["name"] in _REFERENCE.findall(e) for e in panel_exprs + later), variable["name"]
        # A chained variable reads only the variables before it (Grafana resolves them in order).
        assert set(_REFERENCE.findall(query)) <= set(names[:i]), query
    referenced = {ref for expr in panel_exprs for ref in _REFERENCE.findall(expr)}
    assert referenced - _BUILTINS <= set(names)


_SELECTOR = re.compile(r"\b(suanli_[a-z0-9_]+)\{([^}]*)\}")
_MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
# Labels every scraped series has: Prometheus's target labels and the scrape configs' `service`.
_TARGET_LABELS = ("job", "instance", "service")


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_selectors_filter_on_labels_their_metric_has(path: Path) -> None:
    # A filter on a label the metric lacks matches nothing once a variable is set to a value: an empty
    # panel that "All" (.*) hides.
    problems = []
    for expr in _exprs(_load(path)):
        for metric, selector in _SELECTOR.findall(expr):
            [name] = _metric_names(metric)
            allowed = {
                *METRICS_BY_NAME[name].labels,
                *_TARGET_LABELS,
                *(["le"] if metric.endswith("_bucket") else []),
            }
            problems += [f"{metric}: {label}" for label in _MATCHER.findall(selector) if label not in allowed]
    assert problems == []


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


# --- security: SASL_SSL listeners, no plaintext port, one database role and Kafka user per service ------

BROKERS = ("kafka-1", "kafka-2", "kafka-3")


def _published(svc: dict[str, Any]) -> list[int]:
    """Container ports a service publishes on the host ("29092:29092", "127.0.0.1:3000:3000", long form)."""
    ports = []
    for entry in svc.get("ports", []):
        ports.append(int(entry["target"]) if isinstance(entry, dict) else int(str(entry).rsplit(":", 1)[1]))
    return ports


def _listeners(env: dict[str, Any]) -> dict[str, int]:
    return {
        entry.split("://")[0]: int(entry.rsplit(":", 1)[1]) for entry in env["KAFKA_LISTENERS"].split(",")
    }


def test_every_kafka_listener_is_sasl_ssl_and_only_the_external_one_is_published(
    compose: dict[str, Any],
) -> None:
    for name in BROKERS:
        svc = compose["services"][name]
        env = svc["environment"]
        protocols = dict(entry.split(":") for entry in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        listeners = _listeners(env)
        assert {protocols[listener] for listener in listeners} == {"SASL_SSL"}, name
        assert env["KAFKA_SASL_ENABLED_MECHANISMS"] == "SCRAM-SHA-512"
        assert env["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] == "SCRAM-SHA-512"
        # Every advertised listener is one of the SASL_SSL ones.
        advertised = {entry.split("://")[0] for entry in env["KAFKA_ADVERTISED_LISTENERS"].split(",")}
        assert advertised <= set(listeners)
        assert _published(svc) == [listeners["EXTERNAL"]], name
        # Authorisation on, deny by default, the admin the only super user.
        assert env["KAFKA_AUTHORIZER_CLASS_NAME"].endswith("StandardAuthorizer")
        assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
        assert env["KAFKA_SUPER_USERS"] == "User:admin"
        assert svc["entrypoint"][-2:] == ["/etc/suanli/kafka/suanli-kafka.sh", "broker"]
        assert "./deploy/kafka:/etc/suanli/kafka:ro" in svc["volumes"] and TLS_MOUNT in svc["volumes"]


def test_no_plaintext_port_is_published(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "ports" not in services["postgres"]
    for name, svc in _suanli_services(compose).items():
        if _published(svc):
            # A published Suanli port is a gRPC API, served over TLS only.
            assert svc["environment"]["SUANLI_TLS_CERT"].startswith("/etc/suanli/tls/"), name
            assert TLS_MOUNT in svc["volumes"], name
            assert "secure_channel" in " ".join(svc["healthcheck"]["test"]), name
    for name, svc in services.items():
        assert not {5432, 9092, 9093} & set(_published(svc)), name


def test_every_service_has_its_own_database_role_and_kafka_user(compose: dict[str, Any]) -> None:
    from suanli.bus.acls import password_variable
    from suanli.cli import access
    from suanli.scheduling.entrypoints.settings import SchedulingSettings

    roles = {r.role for r in access.service_roles()}
    users = {u.name for u in access.kafka_users()}
    init_env = compose["services"]["kafka-init"]["environment"]
    seen_users, seen_roles = set(), set()
    for name, svc in _suanli_services(compose).items():
        env = svc["environment"]
        assert env["SUANLI_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", name
        assert env["SUANLI_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512", name
        assert env["SUANLI_KAFKA_SSL_CAFILE"] == "/etc/suanli/tls/ca.pem", name
        user = env["SUANLI_KAFKA_SASL_USERNAME"]
        assert user in users and user != "admin", name
        variable = password_variable(user)
        assert env["SUANLI_KAFKA_SASL_PASSWORD"] == f"${{{variable}:?set {variable}}}", name
        assert variable in init_env, name  # kafka-init gives the user that password
        seen_users.add(user)
        assert "SUANLI_PG_DSN" not in env, name  # never the shared (superuser) DSN
        if name in USES_POSTGRES:
            variable = f"SUANLI_{name.upper()}_PG_DSN"
            if name == "scheduling":
                assert SchedulingSettings.env_name("dsn") == variable
            role = env[variable].removeprefix("postgresql://").split(":")[0]
            assert role in roles and role != "suanli", name
            seen_roles.add(role)
            assert env[variable].startswith(f"postgresql://{role}:${{SUANLI_{name.upper()}_PG_PASSWORD:?"), (
                name
            )
            assert svc["depends_on"]["db-roles"]["condition"] == "service_completed_successfully", name
        assert svc["depends_on"]["kafka-init"]["condition"] == "service_completed_successfully", name
    assert len(seen_users) == len(_suanli_services(compose))  # one user per service
    assert len(seen_roles) == len(USES_POSTGRES)


def test_the_database_roles_are_provisioned_by_the_cli_as_the_owner(compose: dict[str, Any]) -> None:
    from suanli.cli import access

    step = compose["services"]["db-roles"]
    assert step["command"] == ["dev", "db-roles"]
    assert step["restart"] == "on-failure"
    assert step["depends_on"]["postgres"]["condition"] == "service_healthy"
    env = step["environment"]
    pg = compose["services"]["postgres"]["environment"]
    assert env["SUANLI_PG_ADMIN_DSN"].startswith(f"postgresql://{pg['POSTGRES_USER']}:${{SUANLI_PG_PASSWORD")
    for role in access.service_roles():
        assert access.password_variable(role) in env, role.role
    for name in USES_POSTGRES:
        dsn_password = f"SUANLI_{name.upper()}_PG_PASSWORD"
        assert env[dsn_password].startswith(f"${{{dsn_password}:?"), name  # required where it is used


def test_kafka_init_applies_the_generated_acls_as_the_admin(compose: dict[str, Any]) -> None:
    step = compose["services"]["kafka-init"]
    assert step["entrypoint"][-2:] == ["/etc/suanli/kafka/suanli-kafka.sh", "init"]
    assert "./deploy/kafka:/etc/suanli/kafka:ro" in step["volumes"]
    for broker in BROKERS:
        assert step["depends_on"][broker]["condition"] == "service_healthy"
    assert step["environment"]["SUANLI_KAFKA_BOOTSTRAP"] == BOOTSTRAP


# --- tokens on: one signing key made once, its public key in every gRPC service ------------------------

GRPC_SERVICES = ("scheduling", "routing", "billing", "serving")


def _mounts(svc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Container path -> (source, mode) of a service's short-form volumes."""
    out = {}
    for volume in svc.get("volumes", []):
        source, target, *mode = volume.split(":") if not volume.startswith("$") else volume.rsplit(":", 2)
        out[target] = (source, mode[0] if mode else "rw")
    return out


def test_auth_init_makes_the_signing_key_once_in_a_volume_no_service_mounts(compose: dict[str, Any]) -> None:
    from suanli.auth.tokens import PRIVATE_KEY_FILE, PUBLIC_KEY_FILE
    from suanli.cli import access

    step = compose["services"]["auth-init"]
    assert step["restart"] == "on-failure"
    script = " ".join(step["entrypoint"] + step["command"])
    home = step["environment"]["SUANLI_HOME"]
    mounts = _mounts(step)
    assert mounts[home] == ("auth-signing", "rw")
    public_dir = next(target for target, (source, _) in mounts.items() if source == "auth-public")
    # Runs on every start: an existing key pair is kept (a second `auth init` would refuse and fail it).
    assert f"test -f {home}/auth/{PRIVATE_KEY_FILE} || suanli auth init" in script
    assert f"cp {home}/auth/{PUBLIC_KEY_FILE} {public_dir}/{PUBLIC_KEY_FILE}" in script
    assert script.startswith("/bin/sh -c set -e;")
    # The mount points exist in the image, owned by its user: a new volume takes their owner.
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    for directory in (home, public_dir):
        assert re.search(rf"install -d -o suanli -g suanli -m 07\d\d {directory}\b", dockerfile), directory
    # `token create` through this step writes the ledger as its owner, the auth role.
    auth = f"{access.DEFAULT_ROLE_PREFIX}auth"
    assert auth in {r.role for r in access.service_roles()}
    assert step["environment"]["SUANLI_PG_DSN"].startswith(
        f"postgresql://{auth}:${{SUANLI_AUTH_PG_PASSWORD:?"
    )
    assert {"auth-signing", "auth-public"} <= set(compose["volumes"])
    for name, svc in compose["services"].items():
        if name != "auth-init":
            assert "auth-signing" not in {source for source, _ in _mounts(svc).values()}, name


@pytest.mark.parametrize("name", GRPC_SERVICES)
def test_every_grpc_service_verifies_tokens_with_the_public_key(compose: dict[str, Any], name: str) -> None:
    from suanli.auth.server import PUBLIC_KEY_ENV

    svc = compose["services"][name]
    key = PurePosixPath(svc["environment"][PUBLIC_KEY_ENV])
    assert _mounts(svc)[str(key.parent)] == ("auth-public", "ro")
    step = compose["services"]["auth-init"]
    assert f"/{key.name}" in " ".join(step["command"])  # the file auth-init copies there
    assert svc["depends_on"]["auth-init"]["condition"] == "service_completed_successfully"
    # Revocations come from the ledger, read with the service's own role.
    assert svc["depends_on"]["db-roles"]["condition"] == "service_completed_successfully"
    assert f"SUANLI_{name.upper()}_PG_DSN" in svc["environment"]
    assert TLS_MOUNT in svc["volumes"]


@pytest.mark.parametrize("name", ["prometheus", "grafana", "jaeger", "otel-collector"])
def test_observability_ports_are_published_on_loopback_only(compose: dict[str, Any], name: str) -> None:
    ports = compose["services"][name]["ports"]
    assert ports and all(str(p).startswith("127.0.0.1:") for p in ports), ports
