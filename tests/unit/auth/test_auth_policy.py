"""The policy table: complete for every proto, documented verbatim in docs/security.md, sane by role."""

from __future__ import annotations

from pathlib import Path

from suanli.api.billing.v1 import billing_pb2
from suanli.api.routing.v1 import routing_pb2
from suanli.api.scheduler.v1 import scheduler_pb2
from suanli.api.sensing.v1 import agent_logs_pb2
from suanli.api.serving.v1 import serving_pb2
from suanli.auth.policy import POLICY, TenantRule, is_open, markdown
from suanli.auth.principal import Role

DOC = Path(__file__).resolve().parents[3] / "docs" / "security.md"


def test_every_rpc_of_every_service_has_a_rule() -> None:
    defined = {
        f"/{service.full_name}/{method.name}"
        for module in (scheduler_pb2, billing_pb2, routing_pb2, agent_logs_pb2, serving_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert set(POLICY) == defined


def test_request_rules_name_a_field_of_the_request() -> None:
    for method, rule in POLICY.items():
        if rule.tenant is TenantRule.REQUEST:
            service, name = method.strip("/").split("/")
            module = {
                "scheduler": scheduler_pb2,
                "billing": billing_pb2,
                "routing": routing_pb2,
                "serving": serving_pb2,
            }[service.split(".")[1]]
            message = (
                module.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]].methods_by_name[name].input_type
            )
            for part in rule.tenant_field.split("."):
                field = message.fields_by_name[part]
                message = field.message_type or message
        else:
            assert rule.tenant_field == "", method


def test_agents_call_nothing_and_only_platform_admins_close_periods() -> None:
    assert not any(Role.AGENT in rule.roles for rule in POLICY.values())
    assert POLICY["/suanli.billing.v1.Billing/ClosePeriod"].roles == {Role.PLATFORM_ADMIN}
    writers = {m for m, r in POLICY.items() if Role.VIEWER not in r.roles and Role.TENANT_MEMBER in r.roles}
    assert writers == {
        "/suanli.scheduler.v1.Scheduler/SubmitJob",
        "/suanli.scheduler.v1.Scheduler/CancelJob",
        "/suanli.serving.v1.Serving/CreateService",
        "/suanli.serving.v1.Serving/ScaleService",
        "/suanli.serving.v1.Serving/DeleteService",
    }


def test_health_and_reflection_are_the_open_services() -> None:
    assert is_open("/grpc.health.v1.Health/Check")
    assert is_open("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    assert not is_open("/suanli.scheduler.v1.Scheduler/GetJob") and not is_open("garbage")


def test_the_security_doc_carries_the_table_verbatim() -> None:
    assert markdown() in DOC.read_text(encoding="utf-8")
