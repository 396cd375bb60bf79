"""The eviction guard: lost nodes are evicted, unless most of the fleet went silent at once."""

from __future__ import annotations

import pytest

from suanli.scheduling.service_layer.capacity import NodeView
from suanli.scheduling.service_layer.disruption import lost_nodes_to_evict


def fleet(ready: int, lost: int, without_capacity: int = 0) -> list[NodeView]:
    nodes = [NodeView(f"r{i}", status="READY", has_capacity=True) for i in range(ready)]
    nodes += [NodeView(f"l{i}", status="LOST", has_capacity=True) for i in range(lost)]
    # Nodes never seen with capacity are not part of the fleet, whatever their status.
    nodes += [NodeView(f"x{i}", status="LOST") for i in range(without_capacity)]
    return nodes


@pytest.mark.parametrize(
    ("ready", "lost", "without_capacity", "threshold", "evicted", "held"),
    [
        (20, 0, 0, 0.75, 0, 0),  # nothing lost
        (19, 1, 0, 0.75, 1, 0),  # one node died: evict it
        (9, 12, 0, 0.75, 12, 0),  # a large part, still below the threshold: evict
        (5, 15, 0, 0.75, 0, 15),  # three quarters at once: the path to the nodes broke, hold
        (0, 21, 0, 0.75, 0, 21),  # everything lost (a broker restart): hold
        (5, 15, 0, 1.0, 15, 0),  # threshold 1.0 holds only when every node is lost
        (0, 1, 0, 0.75, 1, 0),  # a single-node fleet has no majority to compare with
        (19, 1, 40, 0.75, 1, 0),  # nodes without capacity do not dilute or swell the fraction
    ],
)
def test_lost_nodes_to_evict(
    ready: int, lost: int, without_capacity: int, threshold: float, evicted: int, held: int
) -> None:
    verdict = lost_nodes_to_evict(fleet(ready, lost, without_capacity), threshold)
    assert (len(verdict.evict), len(verdict.held)) == (evicted, held)
    assert verdict.disrupted == (held > 0)
    assert all(n.status == "LOST" for n in (*verdict.evict, *verdict.held))


def test_threshold_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="disruption threshold"):
        lost_nodes_to_evict(fleet(1, 1), 0)
