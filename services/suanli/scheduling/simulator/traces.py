"""Reading the openb trace format (Alibaba cluster-trace-gpu-v2023) into domain values.

Nodes: `sn,cpu_milli,memory_mib,gpu,model`. Pods: `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,
qos,pod_phase,creation_time,deletion_time,scheduled_time]`. GPU milli is clipped to 0..1000 as the FGD
simulator does; `gpu_spec` is a `|`-separated allow-list of GPU models.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from suanli.scheduling.domain.model import GPU_MILLI, GpuDevice, Node, TaskRequest

POD_LIST_PREFIX = "openb_pod_list_"


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    request: TaskRequest
    creation_time: int | None = None
    deletion_time: int | None = None


def workload_name(pods_path: Path) -> str:
    """`openb_pod_list_default.csv` -> `default`; any other file -> its stem."""
    stem = Path(pods_path).stem
    return stem.removeprefix(POD_LIST_PREFIX) if stem.startswith(POD_LIST_PREFIX) else stem


def _int(value: str | None) -> int | None:
    return None if value is None or value.strip() == "" else int(float(value))


def load_nodes(path: Path) -> list[Node]:
    nodes = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            count = int(row["gpu"] or 0)
            model = (row.get("model") or "").strip()
            gpus = tuple(GpuDevice(index=i, model=model) for i in range(count))
            nodes.append(
                Node(
                    id=row["sn"],
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    gpus=gpus,
                )
            )
    if not nodes:
        raise ValueError(f"{path}: no nodes")
    return nodes


def load_pods(path: Path) -> list[TracePod]:
    pods = []
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            count = int(row["num_gpu"] or 0)
            milli = min(max(int(row["gpu_milli"] or 0), 0), GPU_MILLI) if count else 0
            spec = (row.get("gpu_spec") or "").strip()
            try:
                request = TaskRequest(
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    gpu_count=count,
                    gpu_milli=milli,
                    gpu_models=tuple(m for m in spec.split("|") if m) if spec else (),
                )
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: {exc}") from None
            pods.append(
                TracePod(row["name"], request, _int(row.get("creation_time")), _int(row.get("deletion_time")))
            )
    if not pods:
        raise ValueError(f"{path}: no pods")
    return pods
