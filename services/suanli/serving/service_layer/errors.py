"""Why a serving request is refused, as the platform's request error kinds (mapped once by `suanli.rpc`)."""

from __future__ import annotations

from suanli.errors import AlreadyExists, InvalidArgument, NotFound


class InvalidField(InvalidArgument):
    """A request field that is missing or malformed; the message names the field first."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class ServiceNotFound(NotFound):
    def __init__(self, tenant: str, name: str) -> None:
        super().__init__(f"no service {name!r} in tenant {tenant!r}")


class ServiceExists(AlreadyExists):
    def __init__(self, tenant: str, name: str) -> None:
        super().__init__(f"service {name!r} already exists in tenant {tenant!r}")
