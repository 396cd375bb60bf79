"""How event values become bytes: the bus core only sees a `Codec`, services get Avro by default."""

from __future__ import annotations

from typing import Any, Protocol


class Codec(Protocol):
    def encode(self, event_name: str, record: dict[str, Any]) -> bytes: ...

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]: ...


class AvroCodec:
    """Avro single-object encoding through `suanli.contracts` (the repository's schemas)."""

    def __init__(self) -> None:
        # Imported here so the bus core and its tests do not depend on the contracts package loading.
        from suanli import contracts

        self._contracts = contracts
        # Resolved once: looking the registry up per call resolves the schemas path on the filesystem
        # every time, which dominated encode/decode in the bus benchmark.
        self._registry = contracts.default_registry()

    def encode(self, event_name: str, record: dict[str, Any]) -> bytes:
        return self._contracts.encode(event_name, record, registry=self._registry)

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        return self._contracts.decode(data, registry=self._registry)


def default_codec() -> Codec:
    return AvroCodec()
