"""What a simulation run is made of: the trace, the service spec, the clients' regions, the SLO.

Clients are spread over the 10 measured regions (traces/network) with `CLIENT_WEIGHTS`, an assumption
standing in for a global chat service's audience, roughly the shape of internet users near each region:
North America 36 % (Dallas 14, Washington DC 14, Toronto 8), Europe 30 % (London 12, Frankfurt 12,
Madrid 6), Asia-Pacific 28 % (Tokyo 12, Sydney 10, Osaka 6), South America 6 % (Sao Paulo). Each request's
region is drawn from these weights with the run's seed. `--client-weights` replaces them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from suanli.data import data_path
from suanli.replica.service_time import ReplicaSpeed
from suanli.resources import default_catalogue
from suanli.resources.network import measured_network
from suanli.serving.domain.spec import ServiceSpec, ServiceSpecError, validate_service
from suanli.serving.domain.trace import Trace, parse_trace

TRACE = "traces/azure_llm/AzureLLMInferenceTrace_conv.csv"
SERVICE = "deploy/services/chat.yaml"
CLIENT_WEIGHTS: dict[str, float] = {
    "dallas": 14,
    "washington-dc": 14,
    "toronto": 8,
    "sao-paulo": 6,
    "london": 12,
    "frankfurt": 12,
    "madrid": 6,
    "tokyo": 12,
    "osaka": 6,
    "sydney": 10,
}


def load_trace(path: Path | None = None) -> Trace:
    """The Azure conversation trace (or another file in its format)."""
    return parse_trace((path or data_path(TRACE)).read_text(encoding="utf-8"))


@dataclass(frozen=True, slots=True)
class Service:
    spec: ServiceSpec
    speed: ReplicaSpeed

    @property
    def ttft_s(self) -> float:
        assert self.spec.target.ttft_ms is not None
        return self.spec.target.ttft_ms / 1000

    @property
    def tpot_s(self) -> float:
        assert self.spec.target.tpot_ms is not None
        return self.spec.target.tpot_ms / 1000


def load_service(path: Path | None = None, gpu: float | None = None) -> Service:
    """The service spec (default deploy/services/chat.yaml), validated; it must carry a latency SLO.

    `gpu` replaces the spec's per-replica GPU share (a right-sized replica, sizing.py) before validation,
    so a share that cannot hold the model is refused as in the spec itself.
    """
    source = path or data_path(SERVICE)
    try:
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ServiceSpecError([f"{source}: {exc}"]) from None
    if gpu is not None and isinstance(document, dict) and isinstance(document.get("resources"), dict):
        document["resources"]["gpu"] = gpu
    spec, speed = validate_service(document, default_catalogue(), measured_network().regions)
    if not spec.target.has_slo:
        raise ServiceSpecError(["target: the simulator measures SLO attainment: give ttft_ms and tpot_ms"])
    if not spec.regions:
        raise ServiceSpecError(["regions: the simulator needs the service's regions listed"])
    return Service(spec, speed)


def parse_client_weights(text: str, regions: tuple[str, ...]) -> dict[str, float]:
    """`dallas=2,tokyo=1` -> weights (regions not named get 0); empty text: `CLIENT_WEIGHTS`."""
    if not text.strip():
        return dict(CLIENT_WEIGHTS)
    weights: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        region, _, value = part.partition("=")
        if region not in regions:
            raise ValueError(f"unknown region {region!r}; known: {', '.join(regions)}")
        try:
            weights[region] = float(value)
        except ValueError:
            raise ValueError(f"weight of {region} must be a number (got {value!r})") from None
        if weights[region] < 0:
            raise ValueError(f"weight of {region} must be >= 0")
    if sum(weights.values()) <= 0:
        raise ValueError("client weights must not all be 0")
    return weights


def normalised(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {r: w / total for r, w in sorted(weights.items())}
