"""Named policies: ready-made profiles for the FGD paper's baselines, spread, and our own policy.

Each paper policy pairs its node score with the device choice the paper's simulator used for it.
"""

from __future__ import annotations

from typing import Any

from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.plugins import default_registry

TOPOLOGY_WEIGHT = 20
CPU_POOL_WEIGHT = 30
# `network` passes every node for a job without a data region, so it costs the paper's policies nothing
# and keeps a job's RTT bound whichever policy runs.
FILTERS = ["cpu", "memory", "gpu-model", "gpu-fit", "region", "node-selector", "network"]


def _profile(
    name: str,
    description: str,
    score: str | dict[str, Any] | None,
    devices: Any,
    extra_scores: tuple[str | dict[str, Any], ...] = (),
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "admission": ["request-sanity"],
        "filters": FILTERS,
        "scores": ([] if score is None else [score]) + list(extra_scores),
        "devices": devices,
        # The paper's simulator takes the first best node in a per-seed shuffled node order.
        "tie_break": "ordered",
    }


POLICIES: dict[str, dict[str, Any]] = {
    "random": _profile("random", "uniform among feasible nodes (paper baseline)", "random", "random"),
    "dotprod": _profile("dotprod", "Tetris dot product (paper baseline)", "dotprod", "best-fit"),
    "clustering": _profile(
        "clustering", "GPU task-class clustering (paper baseline)", "clustering", "best-fit"
    ),
    "packing": _profile("packing", "GPU packing (paper baseline)", "packing", "best-fit"),
    "bestfit": _profile("bestfit", "least leftover CPU+GPU (paper baseline)", "bestfit", "best-fit"),
    "fgd": _profile("fgd", "fragmentation gradient descent (Weng et al., ATC '23)", "fgd", "fgd"),
    "spread": _profile("spread", "least allocated: balance load", "spread", "best-fit"),
    "fgdb": _profile(
        "fgdb",
        "ours: FGD + CPU stranding + GPU-model pressure + shared-GPU pairing, FGD tie-break and device rule,"
        " CPU-only tasks on GPU-less nodes first, gangs kept together",
        "fgdb",
        "fgdb",
        # network scores 0 on every node for a job without a data region, topology for a task on its own
        # and cpu-pool for GPU tasks or a fleet without GPU-less nodes: the openb figures do not move.
        # The weights make the pool, then the topology tier, decide before fgdb and network (each 0..100):
        # cpu-pool 30 x 100 > topology's range 20 x 100; a topology tier gap 20 x 15 > fgdb + network.
        extra_scores=(
            "network",
            {"name": "cpu-pool", "weight": CPU_POOL_WEIGHT},
            {"name": "topology", "weight": TOPOLOGY_WEIGHT},
        ),
    ),
    "fgdx": _profile(
        "fgdx",
        "FGD score, best-fit tie-break, exact-delta device choice (ties FGD; see fgdb)",
        "fgdx",
        {"name": "fgd", "args": {"exact": True}},
    ),
}


def policy_names() -> list[str]:
    return list(POLICIES)


def policy_profile(name: str) -> Profile:
    try:
        data = POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    return Profile.from_dict(data, default_registry())
