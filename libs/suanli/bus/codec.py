"""How event values become bytes: the bus core only sees a `Codec`, services get Avro by default."""

from __future__ import annotations

from typing import Any, Protocol


class Codec(Protocol):
    """Turns a record of a catalogued event into bytes on the wire and back."""

    def encode(self, event_name: str, record: dict[str, Any]) -> bytes:
        """The wire bytes of ``record``, an instance of ``event_name``."""

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        """The event name and the record that ``data`` holds."""


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
        """Encode with the repository's current schema of ``event_name``."""
        return self._contracts.encode(event_name, record, registry=self._registry)

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        """Decode through the event's current schema, whatever version wrote ``data``."""
        return self._contracts.decode(data, registry=self._registry)


def default_codec() -> Codec:
    """The codec every publisher and consumer uses unless given another (`AvroCodec`)."""
    return AvroCodec()
