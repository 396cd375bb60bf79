"""Billing on the real broker and PostgreSQL: each test gets its own schema, topics and price book."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from billing_testkit import PRICEBOOK, Env


@pytest.fixture
def env(kafka_bootstrap: str, pg_dsn: str, topic_prefix: str, tmp_path: Path) -> Env:
    book = tmp_path / "pricebook.yaml"
    book.write_text(PRICEBOOK)
    return Env(kafka_bootstrap, pg_dsn, topic_prefix, f"bil_{secrets.token_hex(4)}", book)
