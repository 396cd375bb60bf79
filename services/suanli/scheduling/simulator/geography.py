"""Where the simulated fleet and its data are: the openb nodes spread over the measured regions and their
zones, and the weights data regions are drawn with.

Node spread (seeded): the nodes are ordered by GPU model (sorted by name), shuffled inside each model by
the run's generator, and dealt in that order by smooth weighted round-robin over the regions (the nginx
rule: each turn every region gains its weight, the region with the most credit takes the node and pays the
total back; ties go to the region name). A region's node count is then within one node of its weighted
share, and so is its count of each GPU model: every region gets the same mix of devices. Inside a region
the nodes are dealt round-robin over its zones (the zones table's, `dallas-1` .. `dallas-3`).

Default weights: capacity even over the 10 regions; data concentrated in four hubs (`dallas`,
`washington-dc`, `frankfurt`, `tokyo` weigh 2, the six others 1), so the hubs get 4/7 of the jobs while
holding 4/10 of the capacity: nearest-first fills them and has to overflow, which is when the choice of
where to overflow to shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from suanli.resources.network import MeasuredNetwork
from suanli.scheduling.domain.model import Node

HUBS = ("dallas", "washington-dc", "frankfurt", "tokyo")
HUB_WEIGHT = 2.0


def even_weights(regions: Sequence[str]) -> dict[str, float]:
    return {r: 1.0 for r in regions}


def hub_weights(regions: Sequence[str]) -> dict[str, float]:
    return {r: HUB_WEIGHT if r in HUBS else 1.0 for r in regions}


def parse_weights(text: str, regions: Sequence[str], base: Mapping[str, float]) -> dict[str, float]:
    """`dallas=3,tokyo=0` over `base`: the named regions get the given weight; an unknown region, a
    negative or missing number, or every weight 0 is a `ValueError` naming it."""
    weights = dict(base)
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        region, sep, value = part.partition("=")
        region = region.strip()
        if region not in regions:
            raise ValueError(f"unknown region {region!r}; known: {', '.join(regions)}")
        try:
            weight = float(value) if sep else float("nan")
        except ValueError:
            weight = float("nan")
        if not weight >= 0:
            raise ValueError(f"{part!r}: a weight is a number >= 0 (region=weight)")
        weights[region] = weight
    if not any(w > 0 for w in weights.values()):
        raise ValueError("every region weight is 0")
    return weights


def deal(count: int, weights: Mapping[str, float]) -> list[str]:
    """`count` turns of smooth weighted round-robin over the regions with a positive weight."""
    regions = sorted(r for r, w in weights.items() if w > 0)
    if not regions:
        raise ValueError("no region has a positive weight")
    w = np.array([weights[r] for r in regions], dtype=np.float64)
    total = float(w.sum())
    credit = np.zeros(len(regions))
    out = []
    for _ in range(count):
        credit += w
        k = int(np.argmax(credit))  # the first maximum: ties go to the region name
        credit[k] -= total
        out.append(regions[k])
    return out


def spread_nodes(
    nodes: Sequence[Node], network: MeasuredNetwork, weights: Mapping[str, float], rng: np.random.Generator
) -> list[Node]:
    """The nodes, each given a region and a zone by the rule in the module docstring."""
    order: list[Node] = []
    for model in sorted({n.gpu_model or "" for n in nodes}):
        group = [n for n in nodes if (n.gpu_model or "") == model]
        order.extend(group[i] for i in rng.permutation(len(group)))
    regions = deal(len(order), weights)
    turns: dict[str, int] = {}
    out = []
    for node, region in zip(order, regions, strict=True):
        zones = network.zones_of(region) or (f"{region}-1",)
        turn = turns.get(region, 0)
        turns[region] = turn + 1
        out.append(replace(node, region=region, zone=zones[turn % len(zones)]))
    return out


def draw_regions(count: int, weights: Mapping[str, float], rng: np.random.Generator) -> list[str]:
    """`count` regions drawn independently with probability weight / total."""
    regions = sorted(weights)
    p = np.array([weights[r] for r in regions], dtype=np.float64)
    picks = rng.choice(len(regions), size=count, p=p / p.sum())
    return [regions[int(i)] for i in picks]
