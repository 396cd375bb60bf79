"""Which database and broker failures are transient: one classification for every consumer and loop.

A transient failure may succeed if the same work is tried again later (the connection dropped, the
server restarts, a serialization conflict, a broker timeout); anything else is a property of the
input or a bug and goes to the dead-letter topic or up the stack. aiokafka marks its errors with a
``retriable`` flag; asyncpg errors are classified here by class and SQLSTATE class.
"""

from __future__ import annotations

import asyncpg
from aiokafka.errors import KafkaError, KafkaTimeoutError

# SQLSTATE classes that say "the server or the connection", not "your statement": 08 connection
# exception, 53 insufficient resources, 57 operator intervention (shutdown, cancel), 58 system error,
# 40 transaction rollback (serialization failure, deadlock).
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})


class RetriableError(Exception):
    """Raise when the same work may succeed later (a dependency is briefly down)."""


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same operation later may succeed."""
    if isinstance(exc, RetriableError | KafkaTimeoutError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, KafkaError):
        return bool(getattr(exc, "retriable", False))
    if isinstance(exc, asyncpg.InterfaceError | asyncpg.PostgresConnectionError):
        return True
    # The server ended the session (idle_in_transaction_session_timeout, a restart) while asyncpg was
    # between two steps of an operation: the protocol refuses the next one; a fresh connection works.
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        return sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES
    # Reaching a database or broker fails with plain OSErrors too: a Unix socket that is gone while
    # the server restarts (FileNotFoundError), every address of a host refused ("Multiple exceptions").
    return isinstance(exc, OSError)
