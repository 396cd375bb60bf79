"""Metering (算力度量): capacity in compute units, node liveness and usage metering; see docs/metering.md."""
