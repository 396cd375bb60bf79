"""Serving's edges: contract records, PostgreSQL, the in-memory store of the unit tests."""
