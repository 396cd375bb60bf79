"""The environment serving gives each replica's task.

One spelling for serving, which sets it, and the node agents, which read it (a simulated agent serves
such a task as a simulated replica; a real agent adds `PORT_ENV` and reports the task's load).
"""

from __future__ import annotations

from typing import Final

#: The service's name (what its tenant calls it).
SERVICE_ENV: Final = "SUANLI_SERVICE"
#: The service's id (svc-...): the key of its load reports.
SERVICE_ID_ENV: Final = "SUANLI_SERVICE_ID"
#: The replica's id (<service_id>-r<seq>).
REPLICA_ENV: Final = "SUANLI_SERVICE_REPLICA"
#: The model served, a name of `suanli.replica.models.MODELS`.
MODEL_ENV: Final = "SUANLI_SERVICE_MODEL"
#: Requests the replica decodes together at most (the spec's max_batch).
MAX_BATCH_ENV: Final = "SUANLI_SERVICE_MAX_BATCH"
#: Set by a real node agent, not serving: the TCP port the replica's server must listen on. The agent
#: scrapes ``GET http://<agent's replica host>:<port>/metrics`` (docs/inference.md, "Real replicas").
PORT_ENV: Final = "SUANLI_SERVICE_PORT"
