"""Per-tenant submit rate and pending jobs, WatchJob stream count: refusals say when to retry."""

from __future__ import annotations

import pytest

from suanli.scheduling.service_layer.admission import Admission, AdmissionLimits, TooManyRequests


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_allows_a_burst_then_refills_at_the_sustained_rate() -> None:
    clock = Clock()
    admission = Admission(AdmissionLimits(submit_rate=2.0, submit_burst=3), clock)
    for _ in range(3):
        admission.admit_submit("acme", pending=0)
    with pytest.raises(TooManyRequests) as info:
        admission.admit_submit("acme", pending=0)
    assert info.value.retry_after_s == 0.5
    assert str(info.value) == "tenant 'acme' submits faster than 2/s (burst 3); retry in 0.5s"
    admission.admit_submit("beta", pending=0)  # another tenant has its own bucket
    clock.now += 0.5
    admission.admit_submit("acme", pending=0)
    with pytest.raises(TooManyRequests):
        admission.admit_submit("acme", pending=0)
    clock.now += 60  # a quiet spell refills to the burst, not past it
    for _ in range(3):
        admission.admit_submit("acme", pending=0)
    with pytest.raises(TooManyRequests):
        admission.admit_submit("acme", pending=0)


def test_pending_jobs_are_capped_per_tenant_without_spending_the_rate() -> None:
    admission = Admission(AdmissionLimits(max_pending_jobs=2, submit_rate=1.0, submit_burst=1), Clock())
    with pytest.raises(TooManyRequests) as info:
        admission.admit_submit("acme", pending=2)
    assert str(info.value) == "tenant 'acme' has 2 pending jobs, at most 2; retry in 5.0s"
    admission.admit_submit("acme", pending=1)  # the refused submit took no token


def test_watch_streams_are_counted_and_released() -> None:
    admission = Admission(AdmissionLimits(max_watch_streams=2), Clock())
    admission.open_watch()
    admission.open_watch()
    with pytest.raises(TooManyRequests, match="2 WatchJob streams open on this instance, at most 2"):
        admission.open_watch()
    admission.close_watch()
    admission.open_watch()
    assert admission.watch_streams == 2


def test_zero_turns_a_limit_off() -> None:
    admission = Admission(AdmissionLimits(max_pending_jobs=0, submit_rate=0, max_watch_streams=0), Clock())
    for _ in range(1000):
        admission.admit_submit("acme", pending=10**6)
        admission.open_watch()
