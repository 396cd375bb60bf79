"""Where a service's replicas go: the count per allowed region follows the demand each region serves.

Clients are served from their nearest allowed region (by RTT), so a region's share of the demand is the
weight of the clients nearest to it. `apportion` splits a replica count over the regions by those shares
(largest remainder, ties by region name), with at least one replica in each of the `spread` busiest
regions when the count allows: replicas spread across regions for availability.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence


def nearest_shares(
    client_weights: Mapping[str, float], regions: Sequence[str], rtt_ms: Callable[[str, str], float]
) -> dict[str, float]:
    """Each allowed region's share of the client weight nearest to it (shares sum to 1)."""
    if not regions:
        raise ValueError("a service needs at least one region")
    shares = dict.fromkeys(regions, 0.0)
    for client, weight in client_weights.items():
        nearest = min(regions, key=lambda r: (rtt_ms(client, r), r))
        shares[nearest] += weight
    total = sum(shares.values())
    if total <= 0:
        return {r: 1 / len(regions) for r in regions}
    return {r: w / total for r, w in shares.items()}


def apportion(total: int, shares: Mapping[str, float], spread: int = 1) -> dict[str, int]:
    """`total` replicas over the regions in proportion to `shares`, each of the `spread` largest >= 1."""
    order = sorted(shares, key=lambda r: (-shares[r], r))
    floor_of = dict.fromkeys(order, 0)
    guaranteed = order[: min(spread, total)]
    for region in guaranteed:
        floor_of[region] = 1
    left = total - len(guaranteed)
    exact = {r: left * shares[r] for r in order}
    counts = {r: floor_of[r] + math.floor(exact[r]) for r in order}
    rest = total - sum(counts.values())
    by_remainder = sorted(order, key=lambda r: (-(exact[r] - math.floor(exact[r])), r))
    for region in by_remainder[:rest]:
        counts[region] += 1
    return counts
