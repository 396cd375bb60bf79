"""Resolve's answer written straight to protobuf wire bytes (what `ResolveResponse` parses from).

Building the answer as messages cost more than the resolve itself (a message per candidate, a nested
score, one per exclusion, then serialising them). Here a candidate is one `struct.pack` of its numbers
after its strings, encoded once and cached; an exclusion line is encoded once per `Excluded` the table
hands out (it hands out the same objects while its views stand). Field numbers and wire types come from
the generated descriptors and are checked at import; tests/unit/routing parse these bytes and compare
them with the answer built as messages.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.routing.domain.links import LinkStatus
from suanli.routing.domain.scoring import Excluded, Resolution

_DOUBLE, _VARINT, _BYTES = 1, 0, 2
_WIRE = {
    FieldDescriptor.TYPE_DOUBLE: _DOUBLE,
    FieldDescriptor.TYPE_STRING: _BYTES,
    FieldDescriptor.TYPE_MESSAGE: _BYTES,
    FieldDescriptor.TYPE_ENUM: _VARINT,
    FieldDescriptor.TYPE_INT32: _VARINT,
}
# Caches are dropped whole past this size (they refill from what is answered).
_CACHE_LIMIT = 16_384

STATUSES = {
    LinkStatus.UNKNOWN: pb.LINK_STATUS_UNKNOWN,
    LinkStatus.OK: pb.LINK_STATUS_OK,
    LinkStatus.DEGRADED: pb.LINK_STATUS_DEGRADED,
    LinkStatus.DOWN: pb.LINK_STATUS_DOWN,
}


def _tag(message: Descriptor, name: str) -> int:
    """The field's one-byte tag (number and wire type, from the descriptor)."""
    field = message.fields_by_name[name]
    tag = field.number << 3 | _WIRE[field.type]
    if tag >= 0x80:
        raise RuntimeError(f"{message.name}.{name}: its tag takes more than one byte; update answers.py")
    return tag


def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int32 and enums: negative values take ten bytes, two's complement
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINTS = tuple(varint(n) for n in range(1 << 14))


def _length(n: int) -> bytes:
    return _VARINTS[n] if n < len(_VARINTS) else varint(n)


_RESPONSE, _CANDIDATE, _SCORE, _EXCLUSION = (
    pb.ResolveResponse.DESCRIPTOR,
    pb.Candidate.DESCRIPTOR,
    pb.Score.DESCRIPTOR,
    pb.Exclusion.DESCRIPTOR,
)
_CANDIDATES, _EXCLUDED, _EXCLUDED_TOTAL = (
    _tag(_RESPONSE, n) for n in ("candidates", "excluded", "excluded_total")
)
_SCORE_FIELDS = tuple(_tag(_SCORE, n) for n in ("total", "compute", "network", "price"))
# A candidate's numbers, in one pack: score (a nested message of four doubles), free and total CU, RTT,
# loss, bandwidth, link status (an enum below 128: one byte), price per hour.
_NUMBERS = struct.Struct("<BB" + "Bd" * 4 + "Bd" * 5 + "BB" + "Bd")
_SCORE_TAG = _tag(_CANDIDATE, "score")
_SCORE_SIZE = 4 * 9
_FREE, _TOTAL, _RTT, _LOSS, _BANDWIDTH, _STATUS, _PRICE = (
    _tag(_CANDIDATE, n)
    for n in (
        "free_cu",
        "total_cu",
        "rtt_ms",
        "loss_ratio",
        "bandwidth_mbps",
        "link_status",
        "price_per_hour",
    )
)
_CANDIDATE_TEXTS = tuple(_tag(_CANDIDATE, n) for n in ("region", "site", "device_class", "gpu_model"))
_CURRENCY = _tag(_CANDIDATE, "currency")
_EXCLUSION_TEXTS = tuple(_tag(_EXCLUSION, n) for n in ("region", "site", "device_class"))
_CODE, _REASON, _COUNT = (_tag(_EXCLUSION, n) for n in ("code", "reason", "count"))
_STATUS_CODES = {status: code for status, code in STATUSES.items() if 0 <= code < 0x80}
if len(_STATUS_CODES) != len(STATUSES):
    raise RuntimeError("a LinkStatus enum value does not fit one byte; update answers.py")


def _text(tag: int, value: str) -> bytes:
    if not value:
        return b""  # proto3: an empty string is the default, left off the wire
    data = value.encode()
    return bytes((tag,)) + _length(len(data)) + data


def _field(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _length(len(body)) + body


class AnswerWriter:
    """Writes `ResolveResponse` bytes; keeps the encoded strings and exclusion lines it has written."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str, str, str], bytes] = {}
        self._currencies: dict[str, bytes] = {}
        # Keyed by id(): the entry holds the object, so the id cannot be reused while it is cached.
        self._exclusions: dict[int, tuple[Excluded, bytes]] = {}
        self._pack: Callable[..., bytes] = _NUMBERS.pack

    def resolve_response(self, resolution: Resolution, currency: str) -> bytes:
        texts, pack = self._texts, self._pack
        money = self._currencies.get(currency)
        if money is None:
            money = self._currencies[currency] = _text(_CURRENCY, currency)
        st, sc, sn, sp = _SCORE_FIELDS
        parts = []
        for c in resolution.candidates:
            names = (c.region, c.site, c.device_class, c.model)
            prefix = texts.get(names)
            if prefix is None:
                if len(texts) >= _CACHE_LIMIT:
                    texts.clear()
                prefix = texts[names] = b"".join(map(_text, _CANDIDATE_TEXTS, names))
            body = (
                prefix
                + pack(
                    _SCORE_TAG,
                    _SCORE_SIZE,
                    st,
                    c.score,
                    sc,
                    c.compute,
                    sn,
                    c.network,
                    sp,
                    c.price,
                    _FREE,
                    c.free_cu,
                    _TOTAL,
                    c.total_cu,
                    _RTT,
                    c.rtt_ms,
                    _LOSS,
                    c.loss_ratio,
                    _BANDWIDTH,
                    c.bandwidth_mbps or 0.0,
                    _STATUS,
                    _STATUS_CODES[c.link_status],
                    _PRICE,
                    c.price_per_hour,
                )
                + money
            )
            parts.append(_field(_CANDIDATES, body))
        parts.extend(self._exclusion(e) for e in resolution.excluded)
        if resolution.excluded_total:
            parts.append(bytes((_EXCLUDED_TOTAL,)) + varint(resolution.excluded_total))
        return b"".join(parts)

    def _exclusion(self, e: Excluded) -> bytes:
        held = self._exclusions.get(id(e))
        if held is not None and held[0] is e:
            return held[1]
        body = b"".join(
            (
                *map(_text, _EXCLUSION_TEXTS, (e.region, e.site, e.device_class)),
                bytes((_CODE,)) + varint(int(e.code)) if e.code else b"",
                _text(_REASON, e.reason),
                bytes((_COUNT,)) + varint(e.count) if e.count else b"",
            )
        )
        encoded = _field(_EXCLUDED, body)
        if len(self._exclusions) >= _CACHE_LIMIT:
            self._exclusions.clear()
        self._exclusions[id(e)] = (e, encoded)
        return encoded
