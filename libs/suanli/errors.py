"""The kinds of error a request can end in, shared by every service and mapped once to gRPC status.

A service's own errors subclass one of these kinds (``class JobNotFound(NotFound)``); its gRPC
server turns any of them into a status through ``suanli.rpc`` (one table for all servers). The
module is pure (no gRPC import), so domain and service-layer code may raise these kinds.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request that cannot be carried out as asked; the message tells the caller why."""


class InvalidArgument(RequestError):
    """The request itself is malformed or names something impossible; the message names the field."""


class NotFound(RequestError):
    """The thing the request names does not exist (or is not visible to the caller)."""


class AlreadyExists(RequestError):
    """The thing the request would create exists already, with different content."""


class FailedPrecondition(RequestError):
    """The request is valid but the system is not in a state that allows it (e.g. a final job)."""


class Unavailable(RequestError):
    """This instance cannot serve the request now (not the leader, a dependency down); retry later."""


class PermissionDenied(RequestError):
    """The caller is known but may not do this."""


class Unauthenticated(RequestError):
    """The caller could not be identified."""


class ResourceExhausted(RequestError):
    """A limit (rate, size, count) was reached; the message says which and when to retry.

    ``retry_after_s``, when a subclass sets it, is sent to the caller as trailing metadata too.
    """

    retry_after_s: float | None = None


# How a service says "I answered, but my database or broker is away": the start of an UNAVAILABLE
# status's details (suanli.rpc), which clients tell apart from "nothing listening" by it.
DEPENDENCY_UNAVAILABLE = "a dependency of this service is unavailable, retry shortly"
