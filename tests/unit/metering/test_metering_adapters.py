"""Edges: table state and task facts survive JSON; every output record encodes with its contract."""

from __future__ import annotations

from dataclasses import replace

import pytest

from suanli.clock import from_ms
from suanli.contracts import decode, encode
from suanli.metering.adapters import records
from suanli.metering.adapters.jsoncodec import StateDecodeError, TaggedCodec, dumps, loads
from suanli.metering.domain import (
    DeviceShare,
    Ended,
    JobKnown,
    MeteredTask,
    NodeAllocation,
    NodeState,
    Placed,
    Sampled,
    Seen,
    Started,
    check,
    on_placed,
    on_snapshot,
    replay,
)
from suanli.metering.testing import (
    gpu,
    job_submitted,
    ms,
    node_snapshot,
    task_finished,
    task_placed,
    task_preempted,
    task_started,
)
from suanli.resources import default_catalogue

CAT = default_catalogue()
T0 = ms("2025-01-01T10:00:30")
FACTS = TaggedCodec(JobKnown, Placed, Started, Ended, Seen, Sampled)


def _node_state() -> NodeState:
    alloc = NodeAllocation("t1", "job-1", 1, "n1", (DeviceShare(0, 500),), 2000, 1024, 0, T0)
    state, _ = on_placed(None, alloc, catalogue=CAT)
    snap = node_snapshot("n1", T0 + 10, sequence=1, devices=[gpu(0), gpu(1)], task_ids=["t1"])
    return on_snapshot(state, snap, received_at_ms=T0 + 20, catalogue=CAT).state


def _facts() -> list:
    placed = on_snapshot(
        on_placed(
            None,
            NodeAllocation("t1", "job-1", 1, "n1", (DeviceShare(0, 500),), 2000, 1, 0, T0),
            catalogue=CAT,
        )[0],
        node_snapshot("n1", T0, sequence=1, devices=[gpu(0)], task_ids=["t1"]),
        received_at_ms=T0,
        catalogue=CAT,
    ).placed[0]
    return [
        JobKnown("t1", "job-1", "acme", "q"),
        placed,
        Started("t1", "job-1", 1, "n1", T0),
        Sampled("t1", 1, T0 + 30_000, 30_000, 42.5, 1, 900),
        Seen("t1", "n1", T0 + 95_000),
        Ended("t1", 1, T0 + 105_000, "finished"),
    ]


def test_node_state_round_trips() -> None:
    state = _node_state()
    assert state.capacity is not None and state.liveness is not None
    assert loads(NodeState, dumps(state)) == state


def test_task_state_and_facts_round_trip() -> None:
    facts = _facts()
    assert [FACTS.loads(FACTS.dumps(f)) for f in facts] == facts
    state, _ = replay(facts[:5])
    assert state is not None
    assert loads(MeteredTask, dumps(state)) == state


def test_an_attempts_trace_context_survives_the_changelog_and_older_records_read_without_it() -> None:
    traced = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    facts = _facts()
    facts[2] = Started("t1", "job-1", 1, "n1", T0, trace_context=traced)
    state, _ = replay(facts[:5])
    assert state is not None and state.attempts[0].trace_context == traced
    assert loads(MeteredTask, dumps(state)) == state
    older = dumps(replace(state, attempts=(replace(state.attempts[0], trace_context=""),)))
    assert b"trace_context" in older
    stripped = older.replace(b',"trace_context":""', b"")
    assert b"trace_context" not in stripped
    assert loads(MeteredTask, stripped).attempts[0].trace_context == ""


@pytest.mark.parametrize(
    "data", [b"{", b'{"type": "Nope", "data": {}}', b'{"type": "Seen", "data": {"task_id": 1}}']
)
def test_bad_facts_raise_a_decode_error_with_a_reason(data: bytes) -> None:
    with pytest.raises(StateDecodeError) as info:
        FACTS.loads(data)
    assert info.value.reason == "undecodable-state"


def test_output_records_encode_with_their_contracts() -> None:
    state = _node_state()
    assert state.capacity is not None and state.liveness is not None
    cap = records.capacity_record(state.capacity, source_event_id="e1", occurred_at_ms=T0)
    _, back = decode(encode("NodeCapacityChanged", cap))
    assert back["devices"][0]["milli_free"] == 500 and back["used"]["gpu_milli"] == 500
    _, change = check(state.liveness, T0 + 60_000)
    assert change is not None
    _, status = decode(encode("NodeStatusChanged", records.status_record(change)))
    assert (status["status"], status["previous_status"]) == ("LOST", "READY")
    _, windows = replay(_facts())
    for w in windows:
        _, usage = decode(encode("UsageMetered", records.usage_record(w)))
        assert usage["event_id"] == w.event_id and usage["attempt"] == 1
    assert [w.efficiency for w in windows][:1] == [pytest.approx(0.85)]


def test_input_records_map_to_facts() -> None:
    assert records.lifecycle_fact("TaskStarted", task_started("t1", "n1", T0)) == Started(
        "t1", "job-1", 1, "n1", T0
    )
    assert records.lifecycle_fact("TaskFinished", task_finished("t1", "n1", T0)) == Ended(
        "t1", 1, T0, "finished"
    )
    assert records.preempted_fact(task_preempted("t1", "n1", T0)) == Ended("t1", 1, T0, "preempted")
    assert records.job_facts(job_submitted("j", ["a", "b"], T0)) == [
        JobKnown("a", "j", "acme", "research"),
        JobKnown("b", "j", "acme", "research"),
    ]
    assert records.payer_of(task_placed("t1", "n1", T0, job_id="j", tenant="beta", queue="beta.infer")) == [
        JobKnown("t1", "j", "beta", "beta.infer")
    ]
    assert records.payer_of(task_placed("t1", "n1", T0, tenant="", queue="")) == []  # does not say
    alloc = records.allocation_of(task_placed("t1", "n1", T0, devices=[(2, 250)], cpu_milli=1500))
    assert (alloc.devices, alloc.cpu_milli, alloc.placed_at_ms) == ((DeviceShare(2, 250),), 1500, T0)
    assert records.lifecycle_fact("UsageSampled", {"occurred_at": from_ms(T0)}) is None
