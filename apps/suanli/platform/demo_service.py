"""The inference service of `suanli up`'s scenario: its spec, tenant, the gateway's region and the pace.

Kept apart from inference.py (which loads aiohttp and the trace) so `suanli up --help` need not import them.
"""

from __future__ import annotations

from typing import Any

TENANT = "globex"  # the model-serving company of the scenario (deploy/scheduler/demo-queues.yaml)
GATEWAY_REGION = "washington-dc"  # where the demo's users are: the origin of network-aware's RTTs
DEFAULT_SPEED = 1.0  # the trace's own pace: ~5.5 requests a second (traces/azure_llm/README.md)
# After submission stops: how long answers still in flight are waited for (during the drain, which takes
# about as long; a generation takes seconds to tens of seconds); Ctrl-C gives up on them at once.
STOP_GRACE_S = 60.0
DEMO_SERVICE: dict[str, Any] = {
    "name": "chat",
    "queue": TENANT,
    "model": "llama-2-7b",  # 13.5 GB of FP16 weights: half an L40S (24 GB) holds them and a KV cache
    "resources": {"gpu": 0.5, "gpu_models": ["L40S"], "cpu": "4", "memory": "32Gi"},
    "min_replicas": 8,
    "max_replicas": 12,
    "target": {"ttft_ms": 2000, "tpot_ms": 100},
    "max_batch": 16,
    "cold_start_s": 10,
}
# The SLO autoscaler for the service, added where serving's spec takes an `autoscaling:` block (a serving
# older than its autoscaler refuses unknown keys: the service then keeps min_replicas).
AUTOSCALING = {"policy": "slo"}


def demo_spec() -> dict[str, Any]:
    """The spec `suanli up` creates, with the autoscaler where serving's spec takes one."""
    from suanli.serving.domain.spec import ServiceSpec  # pydantic and the model catalogue: on use only

    spec = dict(DEMO_SERVICE)
    if "autoscaling" in ServiceSpec.model_fields:
        spec["autoscaling"] = AUTOSCALING
    return spec
