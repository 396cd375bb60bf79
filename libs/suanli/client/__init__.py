"""The Python client of Suanli.

`SchedulerClient`: gRPC with retries and deadlines, watch as an async iterator, configured like the CLI
(`suanli.client.config`). docs/client.md has the guide.
"""

from suanli.client.config import ConfigError, Context, load_context
from suanli.client.scheduler import FINAL_STATES, NO_RETRY, Retry, SchedulerClient

__all__ = ["FINAL_STATES", "NO_RETRY", "ConfigError", "Context", "Retry", "SchedulerClient", "load_context"]
