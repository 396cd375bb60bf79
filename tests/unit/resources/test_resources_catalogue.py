"""The device catalogue: every required model present and cited, tolerant name matching, unknown models."""

from __future__ import annotations

import csv

import pytest

from suanli.data import data_path
from suanli.resources import (
    CatalogueError,
    DeviceCatalogue,
    DeviceClass,
    cpu_cu,
    cu_of,
    default_catalogue,
    name_tokens,
    parse_catalogue,
)

# shared/ sits beside the clone, in development and in CI alike.
OPENB_NODES = data_path("traces/openb/openb_node_list_gpu_node.csv")

REQUIRED = [
    "H200",
    "H100 SXM",
    "H100 PCIe",
    "H800",
    "A100 80GB SXM",
    "A100 40GB SXM",
    "A800",
    "A10",
    "A30",
    "L40S",
    "L4",
    "T4",
    "V100 SXM2 16GB",
    "V100 SXM2 32GB",
    "P100",
    "G1",
    "G2",
    "G3",
]


def test_every_required_model_has_figures_and_a_source() -> None:
    catalogue = default_catalogue()
    for model in REQUIRED:
        device = catalogue.lookup(model)
        assert device.known and device.model == model
        assert device.fp16_tflops > 0 and device.fp32_tflops and device.memory_gib and device.bandwidth_gbps
        assert device.source


def test_undisclosed_trace_models_state_their_assumption() -> None:
    catalogue = default_catalogue()
    assert all(catalogue.lookup(code).assumption for code in ("G1", "G2", "G3"))
    assert catalogue.lookup("H100 SXM").assumption is None


def test_every_openb_trace_model_is_known() -> None:
    with OPENB_NODES.open() as f:
        models = {row["model"] for row in csv.DictReader(f) if row["model"]}
    assert models, "trace has no models"
    assert all(default_catalogue().lookup(m).known for m in models), models


@pytest.mark.parametrize(
    ("nvml_name", "model"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A800-SXM4-80GB", "A800"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A30", "A30"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("V100M32", "V100 SXM2 32GB"),
        ("v100m16", "V100 SXM2 16GB"),
        ("nvidia  h200", "H200"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "A100 40GB SXM"),
    ],
)
def test_driver_names_resolve(nvml_name: str, model: str) -> None:
    assert default_catalogue().lookup(nvml_name).model == model


def test_a_short_model_never_swallows_a_longer_one() -> None:
    catalogue = default_catalogue()
    assert catalogue.lookup("NVIDIA A100-PCIE-40GB").model == "A100 40GB PCIe"
    assert catalogue.lookup("A10").model == "A10"
    assert catalogue.lookup("L40S").model != catalogue.lookup("L4").model


def test_unknown_model_gets_the_configured_default_and_is_flagged() -> None:
    catalogue = default_catalogue().with_defaults(unknown_gpu_cu=42.0)
    device = catalogue.lookup("Acme Tensor 9000")
    assert device == DeviceClass(
        model="Acme Tensor 9000", fp16_tflops=42.0, source=device.source, known=False
    )
    assert catalogue.cu_of("Acme Tensor 9000", milli=500) == pytest.approx(21.0)
    assert default_catalogue().lookup("Acme Tensor 9000").cu == pytest.approx(65.0)


def test_cu_is_dense_fp16_tensor_tflops_scaled_by_share() -> None:
    assert cu_of("NVIDIA H100 80GB HBM3") == pytest.approx(989.5)
    assert cu_of("Tesla T4", milli=250) == pytest.approx(16.25)
    assert cu_of("A100", milli=0) == 0
    with pytest.raises(ValueError):
        cu_of("T4", milli=1001)


def test_cpu_cores_have_a_cu_value() -> None:
    assert cpu_cu(64_000) == pytest.approx(6.4)
    assert DeviceCatalogue((), cpu_core_cu=0.25).cpu_cu(2_000) == pytest.approx(0.5)


def test_name_tokens_drop_vendor_words_and_separators() -> None:
    assert name_tokens("NVIDIA Tesla V100-SXM2_32GB") == ("V100", "SXM2", "32GB")


def test_malformed_catalogues_are_refused() -> None:
    with pytest.raises(CatalogueError):
        parse_catalogue({"devices": [{"model": "X", "fp16_tflops": 1}]})  # no source
    with pytest.raises(CatalogueError):
        parse_catalogue({"devices": [{"model": "X", "source": "s"}]})  # no figure
    clash = {
        "devices": [
            {"model": "X", "fp16_tflops": 1, "source": "s", "aliases": ["Y"]},
            {"model": "Y", "fp16_tflops": 2, "source": "s"},
        ]
    }
    with pytest.raises(CatalogueError, match="names both"):
        parse_catalogue(clash)
