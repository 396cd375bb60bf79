"""Device check for a GPU machine: run the NVML collector once and print what it reported, as JSON.

    python bench/nvml_probe.py            # exit 0 with {"available": true, "devices": [...]} on a GPU host
                                          # exit 0 with {"available": false, "reason": ...} without one

It also prints the CU the catalogue gives each device and the NodeSnapshot device records the agent would
publish (encoded against the contract, so a schema mismatch fails here, not in production).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import time

from suanli import contracts
from suanli.resources import default_catalogue
from suanli.sensing.adapters.host import HostCollector, NodeCollector
from suanli.sensing.adapters.nvml import NvmlCollector, NvmlUnavailable
from suanli.sensing.domain import records
from suanli.sensing.domain.identity import NodeIdentity


def main() -> int:
    started = time.perf_counter()
    gpu = NvmlCollector.open()
    opened_ms = (time.perf_counter() - started) * 1000
    if isinstance(gpu, NvmlUnavailable):
        print(json.dumps({"available": False, "reason": gpu.reason, "error": gpu.error}, indent=2))
        return 0
    try:
        started = time.perf_counter()
        devices = gpu.devices()
        collect_ms = (time.perf_counter() - started) * 1000
        observation = NodeCollector(HostCollector(), gpu).collect()
        identity = NodeIdentity("nvml-probe", "local", "local-a", "local-1")
        stamp = records.Stamp("00000000-0000-0000-0000-000000000000", records_now())
        snapshot = records.node_snapshot(
            identity, observation, labels={}, sequence=1, interval_ms=5000, task_ids=[], stamp=stamp
        )
        contracts.encode("NodeSnapshot", snapshot)
        catalogue = default_catalogue()
        report = {
            "available": True,
            "driver": gpu.driver_version(),
            "init_ms": round(opened_ms, 1),
            "collect_ms": round(collect_ms, 1),
            "devices": [
                {
                    **dataclasses.asdict(d),
                    "catalogue_model": catalogue.lookup(d.model).model,
                    "catalogue_known": catalogue.lookup(d.model).known,
                    "cu": catalogue.cu_of(d.model),
                }
                for d in devices
            ],
            "snapshot_devices": snapshot["devices"],
            "host": dataclasses.asdict(observation.host),
        }
        print(json.dumps(report, indent=2, default=str))
        return 0
    finally:
        gpu.close()


def records_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


if __name__ == "__main__":
    sys.exit(main())
