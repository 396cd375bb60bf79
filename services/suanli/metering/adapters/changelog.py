"""Tables' changelog topics declared again when the broker no longer knows them.

Tansu keeps nothing across a restart (ARCHITECTURE.md §3). Faust declares each table's changelog topic once,
at start-up; after the broker comes back empty its producer has no partitions for that topic, and the next
table write fails inside faust and stops the worker. So before a batch writes its tables, each changelog
topic the producer knows no partitions of is declared again and its metadata awaited: the write then
lands, as on a first start (`suanli.bus.faust_tables.declare_changelogs`).
"""

from __future__ import annotations

from typing import Any

from suanli.bus.faust_tables import declare_changelogs


class ChangelogTopics:
    """`Effects`' prepare hook for faust tables (anything with a `changelog_topic`)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, tables: list[Any]) -> None:
        await declare_changelogs(self._app, tables)
