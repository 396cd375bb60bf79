"""Shared fixtures: the real broker and PostgreSQL come from suanli.infra.testing."""

pytest_plugins = ["suanli.infra.testing"]
