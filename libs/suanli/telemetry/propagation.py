"""W3C trace context carried in Kafka record headers.

Kafka headers are an ordered list of ``(str, bytes)`` pairs (aiokafka's shape), not a mapping, so the
OpenTelemetry propagators need a getter and setter that speak that shape. The globally configured
propagator is used (``tracecontext,baggage`` unless ``OTEL_PROPAGATORS`` says otherwise), so a producer and
a consumer configured alike always agree on the header names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter

KafkaHeaders = Sequence[tuple[str, bytes | None]]


class _HeadersGetter(Getter[KafkaHeaders]):
    def get(self, carrier: KafkaHeaders, key: str) -> list[str] | None:
        values: list[str] = []
        for name, value in carrier:
            if name.lower() != key.lower() or value is None:
                continue
            try:
                values.append(value.decode("utf-8"))
            except (UnicodeDecodeError, AttributeError):
                # A garbled header from a foreign producer must not stop the consumer; the record is
                # simply treated as the start of a new trace.
                continue
        return values or None

    def keys(self, carrier: KafkaHeaders) -> list[str]:
        return [name for name, _ in carrier]


class _HeadersSetter(Setter[list[tuple[str, bytes]]]):
    def set(self, carrier: list[tuple[str, bytes]], key: str, value: str) -> None:
        carrier.append((key, value.encode("utf-8")))


_GETTER = _HeadersGetter()
_SETTER = _HeadersSetter()


def propagated_fields() -> set[str]:
    """Header names the configured propagator writes (``traceparent``, ``tracestate``, ``baggage``)."""
    return set(propagate.get_global_textmap().fields)


# Every published record asks for the propagator's header names; computing them is most of the cost of an
# inject when no span is active. Remembered per propagator, so replacing the global one is still honoured.
_FIELDS: tuple[object, frozenset[str]] | None = None


def _lowered_fields(propagator: object) -> frozenset[str]:
    global _FIELDS
    if _FIELDS is None or _FIELDS[0] is not propagator:
        _FIELDS = (propagator, frozenset(name.lower() for name in propagate.get_global_textmap().fields))
    return _FIELDS[1]


def inject_headers(
    headers: Iterable[tuple[str, bytes]] | None = None, context: Context | None = None
) -> list[tuple[str, bytes]]:
    """Return ``headers`` plus the trace context of ``context`` (default: the current one).

    The input is not modified. Trace headers already present are replaced rather than duplicated, because
    a record re-published from a consumed one would otherwise carry two ``traceparent`` values and
    consumers would pick either. With no active span nothing is added.
    """
    fields = _lowered_fields(propagate.get_global_textmap())
    out = [(name, value) for name, value in (headers or ()) if name.lower() not in fields]
    propagate.inject(out, context=context, setter=_SETTER)
    return out


def extract_context(headers: KafkaHeaders | None, context: Context | None = None) -> Context:
    """Return a context whose parent span is the one recorded in Kafka ``headers``.

    Missing, ``None`` or malformed headers yield ``context`` (default: the current one) unchanged, so
    callers can always pass the result to ``tracer.start_as_current_span(..., context=...)``.
    """
    return propagate.extract(list(headers or ()), context=context, getter=_GETTER)
