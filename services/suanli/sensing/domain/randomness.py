"""The simulation's source of arbitrary but reproducible values, passed in so the core draws nothing itself.

Every value is derived from a key (and the fleet's seed), never from a shared stream: the load of node 7 at
report 12 is the same whichever nodes reported before it, in any process, on any machine.
"""

from __future__ import annotations

from typing import Protocol


class Draws(Protocol):
    """One stream of pseudo-random numbers (``random.Random`` is one)."""

    def random(self) -> float: ...

    def uniform(self, a: float, b: float) -> float: ...

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float: ...


class KeyedRandom(Protocol):
    """Reproducible values by key: the same key gives the same draws and the same UUID every time."""

    def draws(self, key: str) -> Draws:
        """A fresh stream for ``key``, starting from the beginning each time it is asked for."""
        ...

    def uuid(self, key: str) -> str:
        """A name-based UUID for ``key`` (stable identities of simulated devices)."""
        ...
