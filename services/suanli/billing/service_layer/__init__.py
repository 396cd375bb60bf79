"""Use cases of billing, each run inside one unit of work (one PostgreSQL transaction)."""
