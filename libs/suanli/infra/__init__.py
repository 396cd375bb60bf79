"""Infrastructure launcher: the Kafka-protocol broker and PostgreSQL for development, tests and the demo.

Production runs Apache Kafka and PostgreSQL from docker-compose.yml; here we start the embedded
equivalents (ARCHITECTURE.md §3) so that a machine with nothing but Python runs the whole platform.
"""

from suanli.infra.broker import BrokerBinaryMissing, BrokerProcess, BrokerStartError, find_tansu
from suanli.infra.postgres import PostgresEndpoint, PostgresMode, resolve_postgres

__all__ = [
    "BrokerBinaryMissing",
    "BrokerProcess",
    "BrokerStartError",
    "PostgresEndpoint",
    "PostgresMode",
    "find_tansu",
    "resolve_postgres",
]
