"""The whole platform on one machine: broker, PostgreSQL, every service and a simulated fleet.

Used by `suanli up` and by the end-to-end tests, so both run exactly the same processes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from suanli.auth.ledger import DEFAULT_SCHEMA as AUTH_SCHEMA
from suanli.auth.ledger import TokenLedger
from suanli.auth.principal import Role
from suanli.auth.tls import DevCertificates, create_dev_certificates
from suanli.auth.tokens import KeyPaths, create_keys
from suanli.bus import ensure_topics
from suanli.bus.topics import CATALOGUE
from suanli.cli.config import CONFIG_ENV, Context, write_context
from suanli.clock import SystemClock
from suanli.data import data_path
from suanli.eventstore import PostgresEventStore
from suanli.infra.broker import BrokerProcess
from suanli.infra.dsn import with_database
from suanli.infra.net import free_loopback_port, preferred_loopback_port
from suanli.infra.postgres import PostgresEndpoint, PostgresMode, resolve_postgres
from suanli.platform.health import grpc_serving, http_ok
from suanli.platform.supervisor import RunningService, ServiceSpec, Supervisor, suanli_argv
from suanli.telemetry.spanstore import SpanStoreServer

# The per-service DSN variables, which win over SUANLI_PG_DSN in each service's settings.
SERVICE_DSN_ENVS = (
    "SUANLI_SCHEDULING_PG_DSN",
    "SUANLI_BILLING_PG_DSN",
    "SUANLI_ROUTING_PG_DSN",
    "SUANLI_SERVING_PG_DSN",
)
DEFAULT_FLEET = data_path("deploy/fleets/demo-3regions.yaml")
# The demo's queues (`suanli up`): quotas sized to the demo fleet; tests pass their own.
DEFAULT_QUEUES = data_path("deploy/scheduler/demo-queues.yaml")
DEFAULT_PRICEBOOK = data_path("deploy/billing/pricebook.yaml")


@dataclass(frozen=True)
class StackConfig:
    home: Path
    fleet: Path = DEFAULT_FLEET
    queues: Path = DEFAULT_QUEUES
    pricebook: Path = DEFAULT_PRICEBOOK
    policy: str = "fgdb"
    # Billing periods of a minute, invoiced 15 s after they end (the service's defaults: a month and
    # 15 min), so even a one-minute run closes periods and has real invoices to show (docs/demo.md).
    billing_period: str = "1m"
    billing_close_grace_s: float = 15.0
    pg_mode: PostgresMode = PostgresMode.EMBEDDED
    topic_prefix: str = ""
    snapshot_interval_s: float = 1.0
    scheduling_interval_s: float = 0.5
    reconcile_grace_s: float = 15.0
    # How long a job requeued from a lost node waits for its lost attempt's end at most; the agents
    # fence themselves after the same silence (docs/sensing.md, "Self-fencing"), so no two attempts of
    # a task overlap even when a "lost" node was alive.
    lost_fence_s: float = 10.0
    # Seconds a simulated task holds its resources when its spec gives no duration.
    sim_duration_s: float = 30.0
    # Seconds between the fleet's probe rounds (None: sensing's default); routing is told the same, so
    # a path's DOWN timing is right from its first round.
    probe_interval_s: float | None = None
    # The fleet's run-time faults file (docs/sensing.md, "Network faults"): read before every probe round.
    faults: Path | None = None
    kafka_bootstrap: str | None = None  # an existing broker instead of starting Tansu
    # A database to create on the resolved server (and drop on stop) instead of its default one, so
    # several stacks (tests running side by side, other people's work on a shared :5432) never meet.
    database: str | None = None
    # Start Tansu in its own session, so a Ctrl-C at the terminal reaches only the foreground process
    # (`suanli up`), which then stops the services before the broker instead of losing it under them.
    broker_own_session: bool = False
    # Tokens on (docs/security.md): a fresh key pair in <home>/auth/, the services verify with its public
    # key, a platform-admin token for `suanli up` itself and a CLI context in <home>/config.yaml.
    auth: bool = True
    admin_token_ttl_s: int = 7 * 24 * 3600
    # TLS on every gRPC server (docs/security.md): a development CA and certificates in <home>/tls/; the
    # CLI context trusts that CA.
    tls: bool = True
    # The services' well-known ports (scheduler 50051, billing 50055, routing 50053, serving 50056: the
    # CLI's built-in defaults) where free, else any; off, every port is picked at random (tests running
    # side by side).
    well_known_ports: bool = False
    # A trace store (suanli.telemetry.spanstore) every process exports its spans to over OTLP/gRPC;
    # the CLI context's `traces` entry points `suanli job trace` at its query API.
    traces: bool = True
    # The batch span processor's delay: spans reach the store this long after they end at most.
    trace_export_delay_ms: int = 500


# The CLI's built-in addresses (suanli.client.config): a platform on these is found with no config at all.
WELL_KNOWN_PORTS = {"scheduler": 50051, "billing": 50055, "routing": 50053, "serving": 50056}
GATEWAY_PORT = 8090  # `suanli gateway`'s default --listen


@dataclass
class Stack:
    """Start with `start()`, stop with `stop()` (or use as a context manager); nothing is left running."""

    config: StackConfig
    supervisor: Supervisor = field(init=False)
    bootstrap: str = ""
    pg: PostgresEndpoint | None = None
    scheduler_addr: str = ""
    billing_addr: str = ""
    routing_addr: str = ""
    serving_addr: str = ""
    gateway_url: str = ""  # the request gateway's, once `start_gateway` has started it
    broker: BrokerProcess | None = None
    admin_token: str = ""
    client_config: Path | None = None
    ca: bytes | None = None  # the CA the servers' certificates chain to; None: plaintext
    spans: SpanStoreServer | None = None  # the trace store, when `StackConfig.traces`
    # Each service's /metrics port by its name in the supervisor, picked when it is first started and
    # kept across restarts, so a scraper (the metrics test, a local Prometheus) knows where to look.
    metrics_ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(self.config.home / "logs")

    def __enter__(self) -> Stack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def env(self) -> dict[str, str]:
        assert self.pg is not None
        return {
            "SUANLI_KAFKA_BOOTSTRAP": self.bootstrap,
            "SUANLI_PG_DSN": self.pg.dsn,
            # One database role on one machine (docs/security.md, "PostgreSQL: one role per service"):
            # a service's own DSN left in the shell (from a compose deployment) must not win over it.
            **dict.fromkeys(SERVICE_DSN_ENVS, self.pg.dsn),
            "SUANLI_TOPIC_PREFIX": self.config.topic_prefix,
            "SUANLI_SCHEDULER_ADDR": self.scheduler_addr,
            "SUANLI_BILLING_ADDR": self.billing_addr,
            "SUANLI_ROUTING_ADDR": self.routing_addr,
            "SUANLI_SERVING_ADDR": self.serving_addr,
            # Several services on one machine: a process started without a port of its own (see
            # metrics_env) picks a free one instead of its default.
            "SUANLI_METRICS_PORT": "0",
            **self._auth_env(),
            **self._tls_env(),
            **(self.spans.env(self.config.trace_export_delay_ms) if self.spans is not None else {}),
        }

    def _tls_env(self) -> dict[str, str]:
        if not self.config.tls:
            return {}
        certs = DevCertificates.under(self.config.home / "tls")
        return {"SUANLI_TLS_CERT": str(certs.server_cert), "SUANLI_TLS_KEY": str(certs.server_key)}

    def _auth_env(self) -> dict[str, str]:
        if not self.config.auth:
            return {}
        assert self.pg is not None
        return {
            "SUANLI_AUTH_PUBLIC_KEY": str(KeyPaths(self.config.home / "auth").public),
            "SUANLI_AUTH_DSN": self.pg.dsn,
        }

    def start(self) -> None:
        try:
            self._start_infrastructure()
            self.supervisor.base_env.update(self.env)
            # The services boot side by side (their migrations take an advisory lock each, and none
            # needs another to be up); the fleet goes last, so its first reports find them consuming.
            booting = [
                self.start_scheduling(wait=False),
                self.start_billing(wait=False),
                self.start_metering(),
                self.start_serving(wait=False),
                self.start_routing(wait=False),
            ]
            for running in booting:
                self.supervisor.wait_ready(running)
            self.start_fleet()
        except BaseException:
            self.stop()
            raise

    def _start_infrastructure(self) -> None:
        cfg = self.config
        cfg.home.mkdir(parents=True, exist_ok=True)
        if cfg.kafka_bootstrap:
            self.bootstrap = cfg.kafka_bootstrap
        else:
            self.broker = BrokerProcess(
                log_path=cfg.home / "logs" / "tansu.log", detached=cfg.broker_own_session
            )
            self.bootstrap = self.broker.start()
        self.pg = resolve_postgres(cfg.pg_mode, data_dir=cfg.home / "pg")
        if cfg.database:
            self.pg = _fresh_database(self.pg, cfg.database)
        asyncio.run(ensure_topics(self.bootstrap, CATALOGUE, prefix=cfg.topic_prefix))
        if cfg.traces:
            self.spans = SpanStoreServer().start()
        self.scheduler_addr = self._address("scheduler")
        self.billing_addr = self._address("billing")
        self.routing_addr = self._address("routing")
        self.serving_addr = self._address("serving")
        if cfg.tls:
            self.ca = create_dev_certificates(cfg.home / "tls").ca.read_bytes()
        if cfg.auth:
            self._start_auth()
        self.client_config = cfg.home / "config.yaml"
        write_context(self.client_config, self.context())

    def _address(self, service: str) -> str:
        if self.config.well_known_ports:
            return f"127.0.0.1:{preferred_loopback_port(WELL_KNOWN_PORTS[service])}"
        return f"127.0.0.1:{free_loopback_port()}"

    def _start_auth(self) -> None:
        """A fresh key pair (the database is fresh too) and the admin token."""
        assert self.pg is not None
        dsn = self.pg.dsn
        key = create_keys(KeyPaths(self.config.home / "auth"), replace=True)

        async def mint() -> str:
            async with await PostgresEventStore.connect(dsn, schema=AUTH_SCHEMA, max_size=1) as store:
                ledger = TokenLedger(store, SystemClock())
                await ledger.add_key(key.public_key(), "suanli up")
                _, token = await ledger.issue(
                    key,
                    "suanli-up",
                    "",
                    frozenset({Role.PLATFORM_ADMIN}),
                    self.config.admin_token_ttl_s,
                    "suanli up",
                )
                return token

        self.admin_token = asyncio.run(mint())

    def context(self) -> Context:
        """The CLI's context for this platform: its addresses, the admin token and the CA (if any)."""
        servers = {
            "scheduler": self.scheduler_addr,
            "billing": self.billing_addr,
            "routing": self.routing_addr,
            "serving": self.serving_addr,
            **({"traces": self.spans.query_url} if self.spans is not None else {}),
        }
        ca = str(DevCertificates.under(self.config.home / "tls").ca) if self.config.tls else ""
        return Context("up", servers, self.admin_token, ca)

    def metrics_env(self, name: str) -> dict[str, str]:
        """The environment that gives service ``name`` its own /metrics port (see `metrics_ports`)."""
        port = self.metrics_ports.get(name)
        if port is None:
            port = self.metrics_ports[name] = free_loopback_port()
        return {"SUANLI_METRICS_PORT": str(port)}

    def metrics_url(self, name: str) -> str:
        """Where service ``name`` serves /metrics."""
        return f"http://127.0.0.1:{self.metrics_ports[name]}/metrics"

    def scheduling_spec(self, name: str = "scheduling", listen: str | None = None) -> ServiceSpec:
        cfg = self.config
        address = listen or self.scheduler_addr
        return ServiceSpec(
            name,
            suanli_argv(
                "serve",
                "scheduling",
                "--queues",
                str(cfg.queues),
                "--listen",
                address,
                "--policy",
                cfg.policy,
                "--interval",
                str(cfg.scheduling_interval_s),
                "--reconcile-grace",
                str(cfg.reconcile_grace_s),
            ),
            ready=lambda: grpc_serving(address, ca_pem=self.ca),
            ready_timeout_s=90,
            env={**self.metrics_env(name), "SUANLI_SCHEDULING_LOST_FENCE_S": str(cfg.lost_fence_s)},
        )

    def start_scheduling(
        self, name: str = "scheduling", listen: str | None = None, wait: bool = True
    ) -> RunningService:
        return self.supervisor.start(self.scheduling_spec(name, listen), wait)

    def start_billing(self, wait: bool = True) -> RunningService:
        address = self.billing_addr
        return self.supervisor.start(
            ServiceSpec(
                "billing",
                suanli_argv(
                    "serve", "billing", "--pricebook", str(self.config.pricebook), "--listen", address
                ),
                ready=lambda: grpc_serving(address, ca_pem=self.ca),
                ready_timeout_s=90,
                env={
                    **self.metrics_env("billing"),
                    "SUANLI_BILLING_PERIOD": self.config.billing_period,
                    "SUANLI_BILLING_CLOSE_GRACE_S": str(self.config.billing_close_grace_s),
                    # The closer looks this often, so an invoice follows its grace within seconds.
                    "SUANLI_BILLING_CLOSE_CHECK_S": "5",
                },
            ),
            wait,
        )

    def start_metering(self) -> RunningService:
        return self.supervisor.start(
            ServiceSpec(
                "metering",
                suanli_argv("serve", "metering", "--interval", str(self.config.snapshot_interval_s)),
                env=self.metrics_env("metering"),
            )
        )

    def routing_spec(self, name: str = "routing") -> ServiceSpec:
        address = self.routing_addr
        return ServiceSpec(
            name,
            suanli_argv(
                "serve",
                "routing",
                "--pricebook",
                str(self.config.pricebook),
                "--listen",
                address,
                *self._probe_interval_args(),
            ),
            # Serving once its views are read whole (network.links, capacity.nodes).
            ready=lambda: grpc_serving(address, ca_pem=self.ca),
            ready_timeout_s=90,
            env=self.metrics_env(name),
        )

    def start_routing(self, name: str = "routing", wait: bool = True) -> RunningService:
        return self.supervisor.start(self.routing_spec(name), wait)

    def start_serving(self, wait: bool = True) -> RunningService:
        address = self.serving_addr
        return self.supervisor.start(
            ServiceSpec(
                "serving",
                suanli_argv("serve", "serving", "--listen", address),
                ready=lambda: grpc_serving(address, ca_pem=self.ca),
                ready_timeout_s=90,
                env=self.metrics_env("serving"),
            ),
            wait,
        )

    def start_gateway(self, region: str, policy: str = "network-aware") -> RunningService:
        """`suanli gateway` for clients in ``region``, resolving through routing with the context's token."""
        port = preferred_loopback_port(GATEWAY_PORT) if self.config.well_known_ports else free_loopback_port()
        url = f"http://127.0.0.1:{port}"
        running = self.supervisor.start(
            ServiceSpec(
                "gateway",
                suanli_argv(
                    "gateway", "--region", region, "--listen", f"127.0.0.1:{port}", "--policy", policy
                ),
                ready=lambda: http_ok(f"{url}/healthz"),
                ready_timeout_s=60,
                # The routing address comes with the base environment; the token and CA from the context.
                env={**self.metrics_env("gateway"), CONFIG_ENV: str(self.client_config)},
            )
        )
        self.gateway_url = url
        return running

    def fleet_spec(self, name: str = "fleet") -> ServiceSpec:
        cfg = self.config
        return ServiceSpec(
            name,
            suanli_argv(
                "agent",
                "--simulate",
                str(cfg.fleet),
                "--interval",
                str(cfg.snapshot_interval_s),
                "--sim-duration",
                str(cfg.sim_duration_s),
                *self._probe_interval_args(),
                *(("--faults", str(cfg.faults)) if cfg.faults is not None else ()),
            ),
            env={**self.metrics_env(name), **self.fencing_env()},
        )

    def fencing_env(self) -> dict[str, str]:
        """An agent's self-fence: the scheduler's lost fence (see `StackConfig.lost_fence_s`)."""
        return {"SUANLI_SENSING_SELF_FENCE_S": str(self.config.lost_fence_s)}

    def _probe_interval_args(self) -> tuple[str, ...]:
        interval = self.config.probe_interval_s
        return ("--probe-interval", str(interval)) if interval is not None else ()

    def start_fleet(self, name: str = "fleet") -> RunningService:
        return self.supervisor.start(self.fleet_spec(name))

    def stop(self) -> None:
        self.supervisor.stop_all()
        if self.spans is not None:
            # After the services: their last spans are flushed to it as they shut down.
            self.spans.stop()
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        if self.pg is not None:
            self.pg.stop()
            self.pg = None


def _fresh_database(server: PostgresEndpoint, name: str) -> PostgresEndpoint:
    """Create database ``name`` on ``server`` (dropping a leftover of that name); stopping the returned
    endpoint drops it, then stops the server if we started it."""
    import asyncpg  # only needed when this option is used

    async def admin(statement: str) -> None:
        conn = await asyncpg.connect(server.dsn)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    quoted = '"' + name.replace('"', '""') + '"'
    asyncio.run(admin(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)"))
    asyncio.run(admin(f"CREATE DATABASE {quoted}"))

    def stop() -> None:
        try:
            asyncio.run(admin(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)"))
        finally:
            server.stop()

    return PostgresEndpoint(
        dsn=with_database(server.dsn, name), source=server.source, data_dir=server.data_dir, _stop=stop
    )
