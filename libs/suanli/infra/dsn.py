"""DSN manipulation that works for TCP and Unix-socket URIs alike."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at ``database`` instead of the one it names."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


def database_of(dsn: str) -> str:
    """The database ``dsn`` names (``postgres`` when it names none)."""
    return urlsplit(dsn).path.lstrip("/") or "postgres"


def with_user(dsn: str, user: str, password: str | None = None) -> str:
    """``dsn`` connecting as ``user`` (with ``password``, URL-quoted), same server and database."""
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    login = quote(user, safe="") + (f":{quote(password, safe='')}" if password is not None else "")
    return urlunsplit((parts.scheme, f"{login}@{host}", parts.path, parts.query, parts.fragment))
