"""What an id from the scheduler may look like where it becomes a name on a node.

Task ids (``<job id>-<task name>[-<replica>]``), job ids and node ids travel in placements and end up as
file names (a task's log), process environment and labels on the node. The scheduler checks the ids it
makes with this rule, and the node agent refuses any placement whose ids break it, so a forged or corrupt
order can never name a path outside the agent's directory.
"""

from __future__ import annotations

import re
import uuid

MAX_ID = 253
# No path separator, no leading dot (so no "." / ".." and no hidden files), no spaces or control characters.
ID_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ID - 1}}}")
ID_RULE = f"1..{MAX_ID} letters, digits, '.', '_' or '-', starting with a letter or digit"


def id_problem(value: object, what: str = "id") -> str | None:
    """Why ``value`` is not a safe id (``None`` when it is)."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        shown = value[:80] if isinstance(value, str) else value
        return f"{what} {shown!r}: must be {ID_RULE}"
    return None


# The namespace of job ids made from a submit's idempotency key, and of event ids made from a name.
REQUEST_NAMESPACE = uuid.UUID("6f1c8a52-4c1e-4d39-9d0a-5b2f7c0e9a11")


def job_id_of_request(tenant: str, request_id: str) -> str:
    """The id of the job a submit with this tenant and (non-empty) request_id makes.

    Same key, same job: a concurrent duplicate submit collides in the scheduler's store, and a client
    that sent the request (serving, for a replica) knows the job's id before any answer or event names
    it. The key is per tenant: another tenant reusing a request_id gets its own job, never this one.
    """
    return f"job-{uuid.uuid5(REQUEST_NAMESPACE, f'{tenant}/{request_id}').hex[:12]}"
