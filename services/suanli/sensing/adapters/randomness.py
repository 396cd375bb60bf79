"""`KeyedRandom` from the standard library: ``random.Random`` seeded by (seed, key) and UUIDv5 names."""

from __future__ import annotations

import random
import uuid

_UUID_NAMESPACE = uuid.UUID("6f1b8d1e-5a2c-4c43-9a53-7d3f0e9b2a11")


class SeededRandom:
    """Draws seeded by ``"<seed>|<key>"`` (string seeds hash the same on every machine and Python run).

    UUIDs depend on the key only, so a device keeps its id when the fleet file's seed changes.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def draws(self, key: str) -> random.Random:
        return random.Random(f"{self.seed}|{key}")

    def uuid(self, key: str) -> str:
        return str(uuid.uuid5(_UUID_NAMESPACE, key))
