"""Edges of metering: contract records, JSON state for tables, Prometheus gauges."""
