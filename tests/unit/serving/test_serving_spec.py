"""The service spec: a valid document, and garbage refused with the field path and the reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from suanli.errors import InvalidArgument
from suanli.resources import default_catalogue
from suanli.serving.domain.spec import MAX_BATCH, MAX_REPLICAS, ServiceSpecError, validate_service
from suanli.serving.entrypoints.grpc_api import MAX_SPEC_BYTES

REGIONS = ("dallas", "frankfurt", "tokyo")


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "chat",
        "model": "llama-2-13b",
        "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"], "cpu": 8, "memory": "64Gi"},
        "min_replicas": 2,
        "max_replicas": 20,
        "target": {"concurrency": 8, "ttft_ms": 2000, "tpot_ms": 100},
        "regions": ["dallas", "tokyo"],
    }
    base.update(changes)
    return base


def problems(document: Any) -> str:
    with pytest.raises(ServiceSpecError) as caught:
        validate_service(document, default_catalogue(), REGIONS)
    return str(caught.value)


def test_a_valid_spec_gives_the_spec_and_its_replica_speed() -> None:
    spec, speed = validate_service(doc(), default_catalogue(), REGIONS)
    assert spec.gpus == 0.5
    assert spec.gpu_model == "A100 80GB SXM"
    assert spec.target.e2e_target_s(101) == pytest.approx(2.0 + 100 * 0.1)
    assert speed.max_batch == 16
    assert speed.kv_capacity_tokens > 0


def test_the_error_is_an_invalid_argument_for_the_rpc_layer() -> None:
    with pytest.raises(InvalidArgument):
        validate_service(doc(max_replicas=1), default_catalogue(), REGIONS)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"name": "Chat!"}, "name: must be lowercase letters"),
        ({"model": "gpt-9"}, "model: unknown model 'gpt-9'"),
        ({"min_replicas": 5, "max_replicas": 2}, "0 <= min_replicas <= max_replicas"),
        ({"min_replicas": 0}, "min_replicas 0 needs scale_to_zero: true"),
        ({"max_replicas": "many"}, "max_replicas: must be an integer"),
        ({"target": {}}, "needs concurrency or a latency SLO"),
        ({"target": {"ttft_ms": 500}}, "needs both ttft_ms and tpot_ms"),
        ({"target": {"concurrency": -1}}, "concurrency must be above 0"),
        ({"resources": {"cpu": 4}}, "resources: a replica needs a GPU"),
        ({"resources": {"gpu": 1, "gpu_models": []}}, "name exactly one GPU model"),
        ({"resources": {"gpu": 1.5, "gpu_models": ["T4"]}}, "resources.gpu"),
        ({"max_batch": 0}, "max_batch: must be 1..1024"),
        ({"cold_start_s": -5}, "cold_start_s: must be 0..3600"),
        ({"regions": ["dallas", "dallas"]}, "lists a region twice"),
        ({"spread": "everywhere"}, "spread: must be one of"),
        ({"replicas": 3}, "replicas: unknown field"),
    ],
)
def test_garbage_is_refused_with_the_path_and_the_reason(changes: dict[str, Any], expected: str) -> None:
    assert expected in problems(doc(**changes))


@pytest.mark.parametrize("document", [None, 42, "chat", ["a"], {}])
def test_a_document_that_is_not_a_spec_is_refused(document: Any) -> None:
    assert problems(document)


def test_checks_that_need_the_catalogue_and_the_network() -> None:
    assert "'Z9000' is not in the device catalogue" in problems(
        doc(resources={"gpu": 1, "gpu_models": ["Z9000"]})
    )
    assert "regions: unknown ['atlantis']" in problems(doc(regions=["atlantis"]))


def test_a_model_larger_than_the_gpu_share_does_not_fit() -> None:
    # 70B in FP16 is 138 GB; a quarter of an 80 GB A100 holds 18 GiB.
    message = problems(doc(model="llama-2-70b", resources={"gpu": 0.25, "gpu_models": ["A100 80GB SXM"]}))
    assert "resources.gpu: llama-2-70b needs 128.5 GiB of weights" in message


def test_the_limits_docs_serving_states_are_the_codes() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "serving.md").read_text()
    row = re.search(r"^\| replicas per service \| `max_replicas` ≤ ([\d,]+) \(`MAX_REPLICAS`\)", text, re.M)
    assert row is not None, "docs/serving.md's spec limits lost the replicas row"
    assert int(row.group(1).replace(",", "")) == MAX_REPLICAS
    assert f"max_replicas <= {MAX_REPLICAS} (got 2 and {MAX_REPLICAS + 1})" in text  # the quoted refusal
    assert f"<= {MAX_REPLICAS} (got 2 and {MAX_REPLICAS + 1})" in problems(doc(max_replicas=MAX_REPLICAS + 1))
    assert f"| `max_batch` | 1..{MAX_BATCH:,} |" in text
    assert f"| spec text (`CreateService`'s `spec`) | ≤ {MAX_SPEC_BYTES // 1024} KiB |" in text
