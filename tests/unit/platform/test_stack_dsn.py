"""`suanli up` keeps one database role: every service's own DSN variable points at the stack's database."""

from __future__ import annotations

from pathlib import Path

from suanli.billing.entrypoints.settings import BillingSettings
from suanli.infra.postgres import PostgresEndpoint
from suanli.platform.stack import SERVICE_DSN_ENVS, Stack, StackConfig
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.serving.entrypoints.settings import ServingSettings


def test_the_stack_sets_each_services_own_dsn_variable(tmp_path: Path) -> None:
    own = {
        SchedulingSettings.env_names("dsn")[0],
        BillingSettings.env_names("pg_dsn")[0],
        RoutingSettings.env_names("pg_dsn")[0],
        ServingSettings.env_names("pg_dsn")[0],
    }
    assert set(SERVICE_DSN_ENVS) == own
    stack = Stack(StackConfig(home=tmp_path, auth=False, tls=False))
    stack.pg = PostgresEndpoint(dsn="postgresql://postgres@/postgres?host=/tmp/x", source="embedded")
    env = stack.env
    assert {env[name] for name in (*own, "SUANLI_PG_DSN")} == {stack.pg.dsn}
