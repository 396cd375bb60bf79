"""`suanli queue`'s --quota syntax and how update merges the options into the queue's spec."""

from __future__ import annotations

import re

import pytest
import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.queue import _change, parse_quota


def test_a_quota_with_every_limit() -> None:
    quota = parse_quota("gpu:A100 80GB SXM=8000,max=12000,borrow=4000,lend=2000")
    assert (quota.flavour, quota.guaranteed, quota.maximum, quota.borrowing_limit, quota.lending_limit) == (
        "gpu:A100 80GB SXM",
        8000,
        12000,
        4000,
        2000,
    )
    bare = parse_quota("cpu=64000")
    assert not any(bare.HasField(f) for f in ("maximum", "borrowing_limit", "lending_limit"))


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("gpu:A100", "expected FLAVOUR=GUARANTEED"),
        ("=1", "expected FLAVOUR=GUARANTEED"),
        ("cpu=lots", "'lots' is not an integer amount"),
        ("cpu=1,ceiling=2", "unknown limit 'ceiling' (max, borrow, lend)"),
    ],
)
def test_a_bad_quota_names_the_problem(value: str, problem: str) -> None:
    with pytest.raises(typer.BadParameter, match=re.escape(problem)):
        parse_quota(value)


def test_update_replaces_a_flavour_in_place_adds_new_ones_and_removes_named_ones() -> None:
    spec = pb.QueueSpec(
        name="acme",
        quotas=[
            pb.QuotaSpec(flavour="gpu:H100", guaranteed=1),
            pb.QuotaSpec(flavour="gpu:A100", guaranteed=2),
            pb.QuotaSpec(flavour="cpu", guaranteed=3),
        ],
    )
    _change(spec, [parse_quota("gpu:H100=10,borrow=5"), parse_quota("memory=4")], ["cpu"])
    assert [(q.flavour, q.guaranteed) for q in spec.quotas] == [
        ("gpu:H100", 10),
        ("gpu:A100", 2),
        ("memory", 4),
    ]
    assert spec.quotas[0].borrowing_limit == 5
    with pytest.raises(typer.BadParameter, match="queue acme has no quota for disk"):
        _change(spec, [], ["disk"])
