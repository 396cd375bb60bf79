"""A real replica's load, read from its ``/metrics`` page (vLLM's metric names): the scrape contract.

Pure: the text of one scrape and the previous one in, a `ReplicaLoad` out (docs/inference.md, "Real
replicas: the load they report"). The adapter (adapters.replica_scrape) fetches the text and publishes.

What the page tells:
- ``vllm:num_requests_running`` -> in_flight, ``vllm:num_requests_waiting`` -> queued (both required: a
  page without them is not a model server's, and an idle-looking report would draw traffic to it);
- ``vllm:request_success_total`` -> finished_total, ``vllm:prompt_tokens_total`` -> context_tokens_total,
  ``vllm:generation_tokens_total`` -> generated_tokens_total (missing: 0);
- ``vllm:e2e_request_latency_seconds`` (histogram) -> recent_latency_s, the mean of the requests finished
  since the previous scrape (difference of ``_sum`` over difference of ``_count``), or the previous mean
  when none finished, as a simulated replica reports it;
- ``vllm:kv_cache_usage_perc`` (vLLM v1) or ``vllm:gpu_cache_usage_perc`` (v0), a 0..1 fraction, with the
  capacity ``num_gpu_blocks x block_size`` of ``vllm:cache_config_info`` -> kv_free_tokens.

Every series of a name is summed (labels such as ``model_name`` or ``finished_reason`` split them).
arrived_total is finished + running + waiting: vLLM counts no arrivals, and a request is in one of those
three or was aborted (aborted ones are not counted, so it can undercount).

What the page cannot tell comes from the `Fallbacks`: max_batch from the placement, the speed figures from
the service-time model when the model and GPU are known, else the constants below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from suanli.contracts.load import ReplicaLoad
from suanli.replica.live import ReplicaIdentity
from suanli.replica.service_time import ReplicaSpeed

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
FINISHED = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
LATENCY = "vllm:e2e_request_latency_seconds"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
CACHE_CONFIG = "vllm:cache_config_info"

# Without the model's speed on this GPU, slow figures: a balancer then sends a replica less rather than
# more than it can take. 1,000 prompt tokens/s and 50 ms a decode step are below what vLLM reaches for a
# 7B model on one A10-class GPU.
FALLBACK_PREFILL_TOKENS_PER_S = 1000.0
FALLBACK_DECODE_STEP_S = 0.05
# Without a KV capacity (no cache_config_info, no model figures), the KV cache does not limit routing:
# the balancer's own default for a replica that does not say.
UNKNOWN_KV_FREE_TOKENS = 1 << 62


class MetricsError(ValueError):
    """The text is not a model server's metrics page (not Prometheus text, or without the gauges)."""


@dataclass(frozen=True, slots=True)
class VllmSample:
    """One scrape's numbers: gauges now and counters since the server started."""

    running: int
    waiting: int
    finished_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    latency_sum_s: float = 0.0
    latency_count: int = 0
    kv_usage: float | None = None  # fraction of the KV cache in use, 0..1
    kv_capacity_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Fallbacks:
    """What a replica's load report needs and its metrics page does not say."""

    max_batch: int
    speed: ReplicaSpeed | None = None  # the service-time model's, when the model and GPU are known


def parse_vllm_metrics(text: str) -> VllmSample:
    """The numbers of a vLLM ``/metrics`` page; `MetricsError` says why it is not one."""
    totals: dict[str, float] = {}
    capacity: int | None = None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == CACHE_CONFIG:
                    capacity = _kv_capacity(sample.labels) or capacity
                    continue
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # the parser's ways of saying garbage
        raise MetricsError(f"not Prometheus text: {exc}") from None
    missing = [name for name in (RUNNING, WAITING) if name not in totals]
    if missing:
        raise MetricsError(f"no {' nor '.join(missing)} on the page: not a vLLM server's metrics")
    for name, value in totals.items():
        if not math.isfinite(value) or value < 0:
            raise MetricsError(f"{name}: {value} is not a count")
    usage = next((totals[name] for name in KV_USAGE if name in totals), None)
    return VllmSample(
        running=round(totals[RUNNING]),
        waiting=round(totals[WAITING]),
        finished_total=round(totals.get(FINISHED, 0.0)),
        prompt_tokens_total=round(totals.get(PROMPT_TOKENS, 0.0)),
        generation_tokens_total=round(totals.get(GENERATION_TOKENS, 0.0)),
        latency_sum_s=totals.get(f"{LATENCY}_sum", 0.0),
        latency_count=round(totals.get(f"{LATENCY}_count", 0.0)),
        kv_usage=min(1.0, usage) if usage is not None else None,
        kv_capacity_tokens=capacity,
    )


def _kv_capacity(labels: dict[str, str]) -> int | None:
    try:
        return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    except (KeyError, ValueError):  # vLLM leaves num_gpu_blocks "None" until the engine has sized it
        return None


def recent_latency_s(now: VllmSample, previous: VllmSample | None, previous_mean_s: float) -> float:
    """Mean latency of the requests finished between two scrapes; ``previous_mean_s`` when none did.

    A count that went down is a restarted server: its counters start again from 0, so all of the new
    ones are the interval's.
    """
    count, total = now.latency_count, now.latency_sum_s
    if previous is not None and previous.latency_count <= count:
        count -= previous.latency_count
        total -= previous.latency_sum_s
    if count <= 0 or total < 0:
        return previous_mean_s
    return total / count


def replica_load(
    sample: VllmSample,
    latency_s: float,
    *,
    identity: ReplicaIdentity,
    fallbacks: Fallbacks,
    interval_s: float,
    now: datetime,
) -> ReplicaLoad:
    """The load report of one scrape (``latency_s`` from `recent_latency_s`)."""
    speed = fallbacks.speed
    capacity = sample.kv_capacity_tokens
    if capacity is None and speed is not None:
        capacity = speed.kv_capacity_tokens
    usage = sample.kv_usage or 0.0
    kv_free = UNKNOWN_KV_FREE_TOKENS if capacity is None else max(0, round(capacity * (1.0 - usage)))
    if speed is not None:
        prefill_tokens_per_s = speed.prefill_tokens_per_s
        kv_used = (capacity or 0) * usage
        decode_step_s = speed.step_s(max(1, sample.running), kv_used)
    else:
        prefill_tokens_per_s = FALLBACK_PREFILL_TOKENS_PER_S
        decode_step_s = FALLBACK_DECODE_STEP_S
    # The waiting requests' prompts are not on the page: the mean prompt so far stands in for each.
    started = sample.finished_total + sample.running
    mean_prompt = sample.prompt_tokens_total / started if started else 0.0
    return ReplicaLoad(
        service_id=identity.service_id,
        replica_id=identity.replica_id,
        region=identity.region,
        address=identity.address,
        in_flight=sample.running,
        queued=sample.waiting,
        max_batch=fallbacks.max_batch,
        prefill_tokens_per_s=prefill_tokens_per_s,
        decode_step_s=decode_step_s,
        recent_latency_s=latency_s,
        prefill_backlog_s=sample.waiting * mean_prompt / prefill_tokens_per_s,
        kv_free_tokens=kv_free,
        interval_s=interval_s,
        reported_at=now,
        arrived_total=sample.finished_total + sample.running + sample.waiting,
        finished_total=sample.finished_total,
        context_tokens_total=sample.prompt_tokens_total,
        generated_tokens_total=sample.generation_tokens_total,
    )
