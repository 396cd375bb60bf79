"""The one policy table: every RPC of every service -> the roles that may call it and its tenant rule.

The interceptor (`suanli.auth.interceptor`) enforces the roles and the REQUEST rule before a servicer
runs; servicers enforce RESOURCE and LIST through `suanli.auth.context`, because only they know which
tenant a job or queue belongs to. The isolation matrix test is generated from this table, and
docs/security.md copies it (`python -m suanli.auth.policy` prints the Markdown).

Tenant rules, and why each answers what it does:
- NONE: the answer holds no tenant's data (network, nodes' free capacity).
- REQUEST: the request names the tenant (a field, or a queue whose first segment is the tenant). Another
  tenant -> PERMISSION_DENIED: the caller wrote the name, so refusing it leaks nothing. An empty tenant
  field is filled with the caller's tenant.
- RESOURCE: the request names a job or queue by id. Another tenant's -> NOT_FOUND, the same answer as
  for an id that does not exist, so a caller cannot probe which ids exist elsewhere.
- LIST: the answer is filtered to the caller's tenant (nothing is refused).
Platform-wide roles (platform-admin, service) pass every tenant rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from suanli.auth.principal import Role

SCHEDULER: Final = "suanli.scheduler.v1.Scheduler"
BILLING: Final = "suanli.billing.v1.Billing"
ROUTING: Final = "suanli.routing.v1.Routing"
# Served by each node agent (docs/sensing.md, "Task logs"); the scheduler calls it with its caller's token.
AGENT_LOGS: Final = "suanli.sensing.v1.AgentLogs"
SERVING: Final = "suanli.serving.v1.Serving"
# Served without a token when the open-health setting is on (the default): probes and tooling.
OPEN_SERVICES: Final = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection")


class TenantRule(StrEnum):
    """How a call is confined to the caller's tenant (module docstring: what each answers)."""

    NONE = "none"
    REQUEST = "request"
    RESOURCE = "resource"
    LIST = "list"


@dataclass(frozen=True, slots=True)
class Rule:
    """Who may call one RPC and how it is confined to the caller's tenant.

    ``tenant_field`` (REQUEST only) is the request field naming the tenant, dotted for nested messages;
    ``queue`` says the field is a queue path whose first segment is the tenant.
    """

    roles: frozenset[Role]
    tenant: TenantRule
    tenant_field: str = ""
    queue: bool = False


_P, _S = Role.PLATFORM_ADMIN, Role.SERVICE
_TA, _TM, _V = Role.TENANT_ADMIN, Role.TENANT_MEMBER, Role.VIEWER
# Everyone but agents: agents speak Kafka only, so an agent's token can never read or submit jobs.
READERS: Final = frozenset({_P, _S, _TA, _TM, _V})
# Who may change a tenant's jobs: its admins and members, and the platform's admins.
WRITERS: Final = frozenset({_P, _TA, _TM})
# Charges and invoices: the tenant's admins and viewers (finance), not every member.
BILL_READERS: Final = frozenset({_P, _S, _TA, _V})
ADMINS: Final = frozenset({_P})
# Replica addresses are the platform's plumbing: a load report does not say whose service it is, so no
# tenant rule can confine them; the request gateway calls with a `service` token.
PLUMBING: Final = frozenset({_P, _S})


def _m(service: str, method: str) -> str:
    return f"/{service}/{method}"


POLICY: Final = MappingProxyType(
    {
        _m(SCHEDULER, "SubmitJob"): Rule(WRITERS, TenantRule.REQUEST, "spec.queue", queue=True),
        _m(SCHEDULER, "GetJob"): Rule(READERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "ListJobs"): Rule(READERS, TenantRule.LIST),
        _m(SCHEDULER, "CancelJob"): Rule(WRITERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "WatchJob"): Rule(READERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "ListNodes"): Rule(READERS, TenantRule.NONE),
        _m(SCHEDULER, "ListQueues"): Rule(READERS, TenantRule.LIST),
        _m(SCHEDULER, "GetQueue"): Rule(READERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "ExplainJob"): Rule(READERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "DescribeJob"): Rule(READERS, TenantRule.RESOURCE),
        _m(SCHEDULER, "StreamJobLogs"): Rule(READERS, TenantRule.RESOURCE),
        # Queue administration is the operator's: tenants read their own queues (ListQueues, GetQueue).
        _m(SCHEDULER, "CreateQueue"): Rule(ADMINS, TenantRule.REQUEST, "queue.name", queue=True),
        _m(SCHEDULER, "UpdateQueue"): Rule(ADMINS, TenantRule.REQUEST, "queue.name", queue=True),
        _m(SCHEDULER, "DeleteQueue"): Rule(ADMINS, TenantRule.REQUEST, "name", queue=True),
        _m(SCHEDULER, "ListPriorityClasses"): Rule(READERS, TenantRule.NONE),
        _m(SCHEDULER, "DefinePriorityClass"): Rule(ADMINS, TenantRule.NONE),
        _m(SCHEDULER, "DeletePriorityClass"): Rule(ADMINS, TenantRule.NONE),
        _m(BILLING, "GetUsage"): Rule(READERS, TenantRule.REQUEST, "tenant"),
        _m(BILLING, "ListCharges"): Rule(BILL_READERS, TenantRule.REQUEST, "tenant"),
        _m(BILLING, "GetInvoice"): Rule(BILL_READERS, TenantRule.REQUEST, "tenant"),
        _m(BILLING, "ClosePeriod"): Rule(ADMINS, TenantRule.REQUEST, "tenant"),
        _m(ROUTING, "Resolve"): Rule(READERS, TenantRule.NONE),
        _m(ROUTING, "GetNetwork"): Rule(READERS, TenantRule.NONE),
        _m(ROUTING, "WatchNetwork"): Rule(READERS, TenantRule.NONE),
        _m(ROUTING, "ResolveReplica"): Rule(PLUMBING, TenantRule.NONE),
        # The tenant is the one the attempt's placement named, recorded with its log by the agent.
        _m(AGENT_LOGS, "StreamTaskLog"): Rule(READERS, TenantRule.RESOURCE),
        # Services are named within their tenant: the queue's first segment, or the tenant field.
        _m(SERVING, "CreateService"): Rule(WRITERS, TenantRule.REQUEST, "queue", queue=True),
        _m(SERVING, "GetService"): Rule(READERS, TenantRule.REQUEST, "tenant"),
        _m(SERVING, "ListServices"): Rule(READERS, TenantRule.REQUEST, "tenant"),
        _m(SERVING, "ScaleService"): Rule(WRITERS, TenantRule.REQUEST, "tenant"),
        _m(SERVING, "DeleteService"): Rule(WRITERS, TenantRule.REQUEST, "tenant"),
        _m(SERVING, "WatchService"): Rule(READERS, TenantRule.REQUEST, "tenant"),
        _m(SERVING, "ExplainService"): Rule(READERS, TenantRule.REQUEST, "tenant"),
    }
)


def is_open(method: str) -> bool:
    """Whether ``method`` belongs to a service that may be served without a token (health, reflection)."""
    return method.split("/")[1] in OPEN_SERVICES if method.count("/") == 2 else False


def markdown() -> str:
    """The policy as the Markdown table docs/security.md carries (a test keeps the two equal)."""
    roles = list(Role)
    head = "| RPC | tenant rule | " + " | ".join(r.value for r in roles) + " |"
    rule = "|---|---|" + "---|" * len(roles)
    rows = [
        f"| `{method.strip('/')}` | {r.tenant.value} | "
        + " | ".join("yes" if role in r.roles else "-" for role in roles)
        + " |"
        for method, r in POLICY.items()
    ]
    return "\n".join([head, rule, *rows])


if __name__ == "__main__":
    print(markdown())
