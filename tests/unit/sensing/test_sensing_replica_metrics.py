"""A real replica's /metrics page (vLLM's names) mapped to its load report: parsing, intervals, fallbacks."""

from __future__ import annotations

import datetime as dt

import pytest

from suanli.replica.live import ReplicaIdentity
from suanli.replica.models import MODELS
from suanli.replica.service_time import replica_speed
from suanli.resources import default_catalogue
from suanli.sensing.domain.replica_metrics import (
    FALLBACK_DECODE_STEP_S,
    FALLBACK_PREFILL_TOKENS_PER_S,
    UNKNOWN_KV_FREE_TOKENS,
    Fallbacks,
    MetricsError,
    VllmSample,
    parse_vllm_metrics,
    recent_latency_s,
    replica_load,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
WHO = ReplicaIdentity("svc-x", "svc-x-r1", "r1", "10.0.0.5:8123")

# As vLLM v1 writes it: labelled series, a histogram, the cache configuration as an info metric.
PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 2600.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1500.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 10.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 15.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="1000"} 1.0
"""


def test_a_vllm_page_is_read_summing_each_names_series() -> None:
    sample = parse_vllm_metrics(PAGE)
    assert sample == VllmSample(
        running=3,
        waiting=2,
        finished_total=10,
        prompt_tokens_total=2600,
        generation_tokens_total=1500,
        latency_sum_s=15.0,
        latency_count=10,
        kv_usage=0.25,
        kv_capacity_tokens=16_000,
    )


def test_vllm_v0_names_its_kv_gauge_differently() -> None:
    page = PAGE.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    assert parse_vllm_metrics(page).kv_usage == 0.25


def test_only_the_two_gauges_are_needed_the_rest_reads_as_zero_or_unknown() -> None:
    sample = parse_vllm_metrics("vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n")
    assert sample == VllmSample(running=1, waiting=0)


def test_an_unsized_cache_has_no_capacity_yet() -> None:
    page = PAGE.replace('num_gpu_blocks="1000"', 'num_gpu_blocks="None"')
    assert parse_vllm_metrics(page).kv_capacity_tokens is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<html><body>404</body></html>", "not Prometheus text"),
        ("vllm:num_requests_running one\n", "not Prometheus text"),
        ("", "no vllm:num_requests_running nor vllm:num_requests_waiting"),
        ("process_cpu_seconds_total 3.5\n", "not a vLLM server's metrics"),
        ("vllm:num_requests_running 1\n", "no vllm:num_requests_waiting on the page"),
        ("vllm:num_requests_running -1\nvllm:num_requests_waiting 0\n", "is not a count"),
        ("vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n", "is not a count"),
    ],
)
def test_a_page_that_is_not_a_model_servers_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(MetricsError, match=reason):
        parse_vllm_metrics(text)


def sample(latency_sum_s: float, latency_count: int) -> VllmSample:
    return VllmSample(running=0, waiting=0, latency_sum_s=latency_sum_s, latency_count=latency_count)


def test_recent_latency_is_the_mean_of_the_requests_finished_in_the_interval() -> None:
    assert recent_latency_s(sample(15.0, 10), None, 0.0) == 1.5  # the first scrape: all so far
    assert recent_latency_s(sample(21.0, 12), sample(15.0, 10), 1.5) == 3.0


def test_with_none_finished_the_previous_mean_stays() -> None:
    assert recent_latency_s(sample(15.0, 10), sample(15.0, 10), 1.5) == 1.5
    assert recent_latency_s(sample(0.0, 0), None, 0.0) == 0.0


def test_a_restarted_server_counts_from_zero_again() -> None:
    assert recent_latency_s(sample(2.0, 4), sample(15.0, 10), 1.5) == 0.5


def test_the_load_report_maps_the_page_and_derives_arrivals_and_backlog() -> None:
    load = replica_load(
        parse_vllm_metrics(PAGE),
        1.5,
        identity=WHO,
        fallbacks=Fallbacks(max_batch=8),
        interval_s=0.5,
        now=T0,
    )
    assert (load.service_id, load.replica_id, load.region, load.address) == (
        "svc-x",
        "svc-x-r1",
        "r1",
        "10.0.0.5:8123",
    )
    assert (load.in_flight, load.queued, load.max_batch) == (3, 2, 8)
    assert (load.finished_total, load.arrived_total) == (10, 15)
    assert (load.context_tokens_total, load.generated_tokens_total) == (2600, 1500)
    assert (load.recent_latency_s, load.interval_s, load.reported_at) == (1.5, 0.5, T0)
    assert load.kv_free_tokens == 12_000  # a quarter of 16,000 in use
    # Without the model's figures: the slow constants, and 2 waiting x 200 prompt tokens at that rate.
    assert load.prefill_tokens_per_s == FALLBACK_PREFILL_TOKENS_PER_S
    assert load.decode_step_s == FALLBACK_DECODE_STEP_S
    assert load.prefill_backlog_s == pytest.approx(2 * 200 / FALLBACK_PREFILL_TOKENS_PER_S)


def test_the_service_time_model_gives_the_speed_and_kv_capacity_the_page_lacks() -> None:
    device = default_catalogue().lookup("H100 SXM")
    speed = replica_speed(MODELS["llama-2-7b"], device, 1.0, 8)
    page = "vllm:num_requests_running 2\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.5\n"
    load = replica_load(
        parse_vllm_metrics(page), 0.0, identity=WHO, fallbacks=Fallbacks(8, speed), interval_s=1.0, now=T0
    )
    assert load.prefill_tokens_per_s == speed.prefill_tokens_per_s
    assert load.kv_free_tokens == round(speed.kv_capacity_tokens * 0.5)
    assert load.decode_step_s == speed.step_s(2, speed.kv_capacity_tokens * 0.5)


def test_without_any_kv_capacity_the_cache_does_not_limit_routing() -> None:
    page = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.9\n"
    load = replica_load(
        parse_vllm_metrics(page), 0.0, identity=WHO, fallbacks=Fallbacks(4), interval_s=1.0, now=T0
    )
    assert load.kv_free_tokens == UNKNOWN_KV_FREE_TOKENS and load.prefill_backlog_s == 0.0
