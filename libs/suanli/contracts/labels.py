"""Node labels the agent publishes and other services read (one spelling for both sides)."""

from __future__ import annotations

from typing import Final

#: How a node is observed: ``real`` (this machine's agent) or ``simulated`` (a simulated fleet).
AGENT_MODE: Final = "suanli.io/agent-mode"
#: HOST:PORT of the agent's task-logs endpoint (`suanli.sensing.v1.AgentLogs`); absent: none served.
LOGS_ENDPOINT: Final = "suanli.io/logs-endpoint"
