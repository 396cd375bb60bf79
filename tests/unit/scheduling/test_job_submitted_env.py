"""JobSubmitted v4 stores each task group's environment once: a 1 KB environment on 1,000 replicas stays a
small event, and records of older versions (env copied into every task) still read back the same."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.contracts import decode, encode, new_envelope
from suanli.scheduling.domain.jobs import JobSubmitted
from suanli.scheduling.entrypoints.validation import validate_submit
from suanli.scheduling.service_layer.payloads import body, spec_from_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REPLICAS = 1000
# 20 variables of ~50 bytes: the 1 KB request of issue 13.
ENV = {f"VAR_{i:02d}": "x" * 44 for i in range(20)}


def _big_request() -> pb.SubmitJobRequest:
    task = pb.TaskSpec(
        name="w",
        replicas=REPLICAS,
        command="python train.py",
        env=ENV,
        resources=pb.ResourceRequest(cpu_milli=1000, memory_mib=1024),
    )
    return pb.SubmitJobRequest(spec=pb.JobSpec(name="big", queue="acme", tasks=[task]))


def _encoded(job_id: str, request: pb.SubmitJobRequest) -> bytes:
    spec = validate_submit(request)
    spec = replace(spec, tasks=tuple(replace(t, task_id=f"{job_id}-{t.name}") for t in spec.tasks))
    record = body(JobSubmitted(job_id, spec))
    envelope = new_envelope("scheduling", job_id, event_id=uuid.UUID(int=1), occurred_at=T0)
    return encode("JobSubmitted", {**envelope, **record})


def test_a_1kb_environment_on_1000_replicas_is_stored_once() -> None:
    request = _big_request()
    assert 1000 <= request.ByteSize() < 1200  # the request itself is about 1 KB
    job_id = str(uuid.UUID(int=7))
    data = _encoded(job_id, request)
    env_bytes = sum(len(k) + len(v) for k, v in ENV.items())
    # Copied per replica, the environment alone would weigh env_bytes x 1000 (~1 MB). Stored once, the
    # event is the environment once plus ~100 bytes per replica (its id, name and requests).
    assert len(data) < env_bytes + REPLICAS * 110, len(data)
    assert len(data) < 128 * 1024
    _, decoded = decode(data)
    spec = spec_from_record(decoded)
    assert len(spec.tasks) == REPLICAS
    assert all(dict(t.env) == ENV for t in spec.tasks)
    # Shared in memory as in the event: one tuple for every replica.
    assert len({id(t.env) for t in spec.tasks}) == 1


def test_groups_with_distinct_environments_keep_their_own() -> None:
    a = pb.TaskSpec(name="a", replicas=2, env={"ROLE": "a"}, resources=pb.ResourceRequest(cpu_milli=1))
    b = pb.TaskSpec(name="b", env={"ROLE": "b"}, resources=pb.ResourceRequest(cpu_milli=1))
    c = pb.TaskSpec(name="c", resources=pb.ResourceRequest(cpu_milli=1))
    request = pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[a, b, c]))
    _, decoded = decode(_encoded("job-2", request))
    assert decoded["envs"] == [{"ROLE": "a"}, {"ROLE": "b"}]
    assert [t["env_ref"] for t in decoded["tasks"]] == [0, 0, 1, -1]
    spec = spec_from_record(decoded)
    assert [dict(t.env) for t in spec.tasks] == [{"ROLE": "a"}, {"ROLE": "a"}, {"ROLE": "b"}, {}]


def test_a_v3_record_with_env_in_every_task_still_reads_back() -> None:
    request = _big_request()
    request.spec.tasks[0].replicas = 3
    _, current = decode(_encoded("job-3", request))
    # What a v3 writer stored: no envs table, the environment copied into each task.
    old = {k: v for k, v in current.items() if k not in ("envs", "principal")}
    old["tasks"] = [
        {k: v for k, v in t.items() if k != "env_ref"} | {"env": dict(ENV)} for t in current["tasks"]
    ]
    _, upcast = decode(encode("JobSubmitted", old, version=3))
    assert upcast["envs"] == [] and {t["env_ref"] for t in upcast["tasks"]} == {-1}
    assert [dict(t.env) for t in spec_from_record(upcast).tasks] == [ENV] * 3
    assert spec_from_record(upcast).same_request(spec_from_record(current))
