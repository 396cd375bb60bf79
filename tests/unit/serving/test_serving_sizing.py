"""Right-sizing a replica's GPU share with the queueing model: per-GPU capacity and the binding limit."""

from __future__ import annotations

import pytest

from suanli.replica.models import MODELS
from suanli.replica.service_time import replica_speed
from suanli.resources import default_catalogue
from suanli.serving.domain.capacity import slo_capacity
from suanli.serving.domain.sizing import binding_limit, right_size

A100 = default_catalogue().lookup("A100 80GB SXM")
L13 = MODELS["llama-2-13b"]
# A chat mix like the Azure trace's first minutes: long prompts, a spread of answer lengths.
CONTEXT, GENERATED, KV_PRODUCT = 1100.0, 260.0, 420_000.0
SLO = (2.0, 0.1)


def test_each_option_is_the_queueing_model_of_that_share() -> None:
    options = right_size(L13, A100, 16, CONTEXT, GENERATED, *SLO, KV_PRODUCT)
    for option in options:
        speed = replica_speed(L13, A100, option.gpus, 16)
        assert option.speed == speed
        assert option.capacity == pytest.approx(
            slo_capacity(speed, CONTEXT, GENERATED, *SLO, 1.0, KV_PRODUCT)
        )
        assert option.per_gpu == pytest.approx(option.capacity / option.gpus)


def test_shares_that_cannot_hold_the_weights_are_left_out() -> None:
    gpus = {o.gpus for o in right_size(L13, A100, 16, CONTEXT, GENERATED, *SLO, KV_PRODUCT)}
    assert 0.25 not in gpus  # 26 GB of weights in 18 GiB
    assert {0.5, 1.0} <= gpus


def test_the_best_share_per_gpu_comes_first_and_names_what_binds() -> None:
    options = right_size(L13, A100, 16, CONTEXT, GENERATED, *SLO, KV_PRODUCT)
    assert all(options[0].per_gpu >= o.per_gpu for o in options)
    by_share = {o.gpus: o for o in options}
    # Half a GPU leaves ~10 GiB of KV cache: the cache binds. A larger share leaves proportionally more
    # cache, until the batch limit of 16 binds; past that, more GPU serves less per GPU.
    assert by_share[0.5].limit == "kv-cache"
    assert options[0].gpus > 0.5 and options[0].limit == "batch"
    assert options[0].per_gpu > 1.15 * by_share[0.5].per_gpu
    assert by_share[8.0].per_gpu < options[0].per_gpu
    assert options[0].explain().startswith(f"{options[0].gpus:g} GPU: ")


def test_a_larger_batch_limit_moves_the_best_share_up() -> None:
    small = right_size(L13, A100, 16, CONTEXT, GENERATED, *SLO, KV_PRODUCT)[0]
    large = right_size(L13, A100, 256, CONTEXT, GENERATED, *SLO, KV_PRODUCT)[0]
    assert large.gpus > small.gpus and large.per_gpu > small.per_gpu


def test_binding_limit_is_the_first_check_broken_just_past_capacity() -> None:
    speed = replica_speed(L13, A100, 0.5, 16)
    capacity = slo_capacity(speed, CONTEXT, GENERATED, *SLO, 1.0, KV_PRODUCT)
    assert binding_limit(speed, capacity, CONTEXT, GENERATED, *SLO, KV_PRODUCT) == "kv-cache"
    # A TPOT target just above one unloaded step binds before anything else.
    tight = speed.step_s(1, CONTEXT) * 1.05
    capacity = slo_capacity(speed, CONTEXT, GENERATED, 2.0, tight, 1.0, KV_PRODUCT)
    assert binding_limit(speed, capacity, CONTEXT, GENERATED, 2.0, tight, KV_PRODUCT) == "tpot"
