-- The W3C trace context of the span that wrote the row (``traceparent``), taken when the row is
-- appended and sent by the relay as the record's ``traceparent`` header, so the consumer of a relayed
-- record continues the trace of the command that caused it. NULL: written outside any trace.
ALTER TABLE outbox ADD COLUMN traceparent text;
