"""Counts every Kafka request a Python process of the stack sends (not a test; a measuring hook).

Loaded by every process started with this folder on ``PYTHONPATH`` and ``SUANLI_FETCH_CENSUS`` set to a
directory: wraps ``AIOKafkaClient.send`` and, every 2 s, writes ``<pid>.json`` there with the process's
command line and its counts (fetches per client, topics, partitions and wait; produced batches per
topic; every other request by type). ``bench/fetch_census.py`` sums them:

    SUANLI_FETCH_CENSUS=/tmp/census PYTHONPATH=$PWD/bench/census_hook .venv/bin/python bench/latency.py
    .venv/bin/python bench/fetch_census.py /tmp/census
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

OUT = os.environ.get("SUANLI_FETCH_CENSUS")


def _key(client_id: str, request: Any) -> list[str]:
    name = type(request).__name__
    if name.startswith("FetchRequest"):
        topics = sorted(t[0] for t in request.topics)
        parts = sum(len(t[1]) for t in request.topics)
        return [f"fetch\t{client_id}\t{','.join(topics)}\t{parts}\t{request._max_wait_ms}"]
    if name.startswith("ProduceRequest"):
        return [f"batches\t{t[0]}" for t in request._topics for _ in t[1]]
    return [f"request\t{name}"]


def _install(out: Path) -> None:
    from aiokafka.client import AIOKafkaClient

    counts: Counter[str] = Counter()
    send = AIOKafkaClient.send

    async def counted(self: AIOKafkaClient, node_id: int, request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            counts.update(_key(self._client_id, request))
        except Exception:  # a request shape this hook does not know: counted by type only
            counts[f"request\t{type(request).__name__}"] += 1
        return await send(self, node_id, request, *args, **kwargs)

    AIOKafkaClient.send = counted  # type: ignore[method-assign]
    command = " ".join(a for a in sys.orig_argv[1:] if not a.startswith("/"))[:100]

    def dump() -> None:
        while True:
            time.sleep(2)
            record = {"command": command, "counts": dict(counts)}
            (out / f"{os.getpid()}.json").write_text(json.dumps(record))

    out.mkdir(parents=True, exist_ok=True)
    threading.Thread(target=dump, daemon=True, name="fetch-census").start()


if OUT:
    _install(Path(OUT))
