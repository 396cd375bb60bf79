"""The replica service-time model: figures from the device catalogue and the model's shape."""

from __future__ import annotations

import pytest

from suanli.replica.models import MODELS
from suanli.replica.service_time import (
    DECODE_MBU,
    GIB,
    KV_MEMORY_FRACTION,
    PREFILL_MFU,
    STEP_OVERHEAD_S,
    ModelDoesNotFit,
    replica_speed,
)
from suanli.resources import default_catalogue

A100 = default_catalogue().lookup("A100 80GB SXM")
H100 = default_catalogue().lookup("H100 SXM")
L13 = MODELS["llama-2-13b"]


def test_prefill_is_compute_bound_at_the_documented_utilisation() -> None:
    speed = replica_speed(L13, A100, 1.0, 16)
    assert speed.prefill_tokens_per_s == pytest.approx(312e12 * PREFILL_MFU / (2 * 13e9))
    assert speed.prefill_s(1000) == pytest.approx(1000 / speed.prefill_tokens_per_s)


def test_a_decode_step_reads_the_weights_and_the_batch_cache() -> None:
    speed = replica_speed(L13, A100, 1.0, 16)
    weights = 26e9 / (2039e9 * DECODE_MBU)
    assert speed.step_s(1, 0) == pytest.approx(STEP_OVERHEAD_S + weights)
    kv = 16_000 * L13.kv_bytes_per_token / (2039e9 * DECODE_MBU)
    assert speed.step_s(16, 16_000) == pytest.approx(STEP_OVERHEAD_S + weights + kv)
    # Memory-bound: a batch of 16 costs far less than 16 single steps.
    assert speed.step_s(16, 0) < 2 * speed.step_s(1, 0)


def test_a_large_batch_becomes_compute_bound() -> None:
    speed = replica_speed(L13, A100, 1.0, 1024)
    assert speed.step_s(1000, 0) == pytest.approx(STEP_OVERHEAD_S + 1000 * speed.compute_s_per_token)


def test_a_faster_gpu_and_a_larger_share_are_faster() -> None:
    a100, h100 = replica_speed(L13, A100, 1.0, 16), replica_speed(L13, H100, 1.0, 16)
    assert h100.step_s(8, 8000) < a100.step_s(8, 8000)
    assert h100.prefill_s(1000) < a100.prefill_s(1000)
    half = replica_speed(L13, A100, 0.5, 16)
    assert half.prefill_s(1000) == pytest.approx(2 * a100.prefill_s(1000))


def test_the_kv_cache_is_what_the_weights_leave() -> None:
    speed = replica_speed(L13, A100, 0.5, 16)
    room = 80 * GIB * 0.5 * KV_MEMORY_FRACTION - 26e9
    assert speed.kv_capacity_tokens == int(room // L13.kv_bytes_per_token)


def test_gqa_shrinks_the_cache_per_token() -> None:
    # 70B's 8 KV heads: 320 KiB per token against 13B's 800 KB.
    assert MODELS["llama-2-70b"].kv_bytes_per_token == 2 * 80 * 1024 * 2
    assert MODELS["llama-2-70b"].kv_bytes_per_token < L13.kv_bytes_per_token


def test_a_model_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ModelDoesNotFit, match="llama-2-70b needs"):
        replica_speed(MODELS["llama-2-70b"], A100, 1.0, 16)
    assert replica_speed(MODELS["llama-2-70b"], A100, 2.0, 16).kv_capacity_tokens > 0
