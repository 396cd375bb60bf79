"""Use cases of serving, each run inside one unit of work (one PostgreSQL transaction)."""
