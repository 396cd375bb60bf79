"""Terms port contract: a job's first terms stay, a node's latest region wins, both commit with the unit."""

from __future__ import annotations

import pytest
from billing_contract_kit import STANDARD, Adapter

from suanli.billing.domain.usage import JobTerms


async def test_unknown_job_and_node_have_no_terms(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        assert await unit.terms.job_terms("nobody") is None
        assert await unit.terms.node_region("nowhere") is None


async def test_a_jobs_first_terms_stay(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await unit.terms.record_job_terms("job-1", "acme", STANDARD)
        assert await unit.terms.job_terms("job-1") == STANDARD
    async with adapter.uow.begin() as unit:
        # A repeated JobSubmitted must not re-price anything.
        await unit.terms.record_job_terms("job-1", "acme", JobTerms(priority=-1, preemptible=True))
    async with adapter.uow.begin() as unit:
        assert await unit.terms.job_terms("job-1") == STANDARD


async def test_a_nodes_latest_region_wins(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await unit.terms.record_node_region("n-1", "cn-east")
        assert await unit.terms.node_region("n-1") == "cn-east"
    async with adapter.uow.begin() as unit:
        await unit.terms.record_node_region("n-1", "cn-west")
    async with adapter.uow.begin() as unit:
        assert await unit.terms.node_region("n-1") == "cn-west"


async def test_terms_of_a_unit_that_raises_are_not_kept(adapter: Adapter) -> None:
    with pytest.raises(RuntimeError):
        async with adapter.uow.begin() as unit:
            await unit.terms.record_job_terms("job-1", "acme", STANDARD)
            await unit.terms.record_node_region("n-1", "cn-east")
            raise RuntimeError("effect failed")
    async with adapter.uow.begin() as unit:
        assert await unit.terms.job_terms("job-1") is None
        assert await unit.terms.node_region("n-1") is None


async def test_terms_of_several_jobs_and_nodes_at_once(adapter: Adapter) -> None:
    cheap = JobTerms(priority=-1, preemptible=True)
    async with adapter.uow.begin() as unit:
        await unit.terms.record_job_terms("job-1", "acme", STANDARD)
        # In order: job-1 keeps its first terms, job-2 the first of its two.
        await unit.terms.record_job_terms_many(
            [("job-1", "acme", cheap), ("job-2", "acme", cheap), ("job-2", "acme", STANDARD)]
        )
        await unit.terms.record_job_terms_many([])
        await unit.terms.record_node_region("n-1", "cn-east")
    async with adapter.uow.begin() as unit:
        assert await unit.terms.job_terms_of(["job-1", "job-2", "nobody"]) == {
            "job-1": STANDARD,
            "job-2": cheap,
        }
        assert await unit.terms.job_terms_of([]) == {}
        assert await unit.terms.node_regions_of({"n-1", "nowhere"}) == {"n-1": "cn-east"}
