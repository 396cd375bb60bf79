"""The Python client of Suanli.

`SchedulerClient`: gRPC with retries and deadlines, watch as an async iterator, configured like the CLI
(`suanli.client.config`). docs/client.md has the guide.

The client is imported on first use: the CLI reads the config file through `suanli.client.config` at every
start, and that must not load grpc's stubs and the job-spec models (docs/BENCHMARKS.md, CLI start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from suanli.client.config import ConfigError, Context, load_context

if TYPE_CHECKING:
    from suanli.client.scheduler import FINAL_STATES, NO_RETRY, Retry, SchedulerClient

__all__ = ["FINAL_STATES", "NO_RETRY", "ConfigError", "Context", "Retry", "SchedulerClient", "load_context"]

_LAZY = frozenset({"FINAL_STATES", "NO_RETRY", "Retry", "SchedulerClient"})


def __getattr__(name: str) -> Any:
    """`SchedulerClient` and its companions, imported when first asked for."""
    if name in _LAZY:
        from suanli.client import scheduler

        return getattr(scheduler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
