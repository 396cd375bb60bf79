"""Billing's edges: the price-book file, contract records, PostgreSQL."""
