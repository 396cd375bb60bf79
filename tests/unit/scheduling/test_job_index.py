"""The projection's job index: pages of one scope (every job, a tenant's, a queue's) in submission order
either way, past a token's job, kept as jobs are submitted, evolve and are forgotten; a page reads only
its own scope's jobs and stops once full."""

from __future__ import annotations

import uuid

from _listing import T0, cancelled, flat, job

from suanli.contracts import encode, new_envelope
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore import StoredEvent
from suanli.scheduling.domain.jobs import JobCancelled, JobEvent, JobSubmitted, JobView, Phase, event_name
from suanli.scheduling.service_layer.job_index import JobIndex
from suanli.scheduling.service_layer.payloads import body
from suanli.scheduling.service_layer.projection import Projection, job_stream


def filled(count: int = 30) -> tuple[JobIndex, list[JobView]]:
    """Jobs 1..count, round robin over QUEUES (two tenants: acme with two queues, globex)."""
    index, jobs = JobIndex(), [job(n) for n in range(1, count + 1)]
    for view in jobs:
        index.put(view)
    return index, jobs


def seqs(views: list[JobView]) -> list[int]:
    return [v.seq for v in views]


def every_page(index: JobIndex, size: int, **scope: object) -> list[list[int]]:
    """The pages one scope gives, each asked past the last job of the one before (what a token holds)."""
    pages: list[list[int]] = []
    after = None
    while True:
        page = index.page(size, after=after, **scope)  # type: ignore[arg-type]
        pages.append(seqs(page.jobs))
        if not page.more:
            return pages
        after = page.jobs[-1].seq


def test_pages_run_oldest_first_or_newest_first_and_together_hold_every_job_once() -> None:
    index, _ = filled(30)
    assert len(index) == 30
    forward = every_page(index, 7)
    assert [len(p) for p in forward] == [7, 7, 7, 7, 2]
    assert flat(forward) == list(range(1, 31))
    backward = every_page(index, 7, newest_first=True)
    assert flat(backward) == list(range(30, 0, -1))
    # A page exactly as big as what is left says nothing is left.
    assert every_page(index, 10) == [list(range(1, 11)), list(range(11, 21)), list(range(21, 31))]
    assert index.page(50).more is False and seqs(index.page(50).jobs) == list(range(1, 31))


def test_a_page_past_the_last_job_is_empty_and_a_gone_token_job_still_places_the_page() -> None:
    index, jobs = filled(10)
    assert index.page(5, after=10).jobs == [] and index.page(5, after=1, newest_first=True).jobs == []
    index.forget(jobs[4])  # job 5, the last one a token pointed at
    assert seqs(index.page(3, after=5).jobs) == [6, 7, 8]
    assert seqs(index.page(3, after=5, newest_first=True).jobs) == [4, 3, 2]


def test_a_tenant_scope_holds_all_its_queues_and_a_queue_scope_that_queue_alone() -> None:
    index, jobs = filled(30)
    acme = [j.seq for j in jobs if j.spec.tenant == "acme"]
    assert flat(every_page(index, 4, tenant="acme")) == acme
    assert flat(every_page(index, 4, tenant="acme", newest_first=True)) == acme[::-1]
    vision = [j.seq for j in jobs if j.spec.queue == "acme/vision"]
    assert flat(every_page(index, 3, queue="acme/vision")) == vision
    top = [j.seq for j in jobs if j.spec.queue == "acme"]
    assert flat(every_page(index, 3, queue="acme")) == top  # not the queues below it
    assert index.page(10, tenant="initech").jobs == [] and index.page(10, queue="acme/nlp").jobs == []
    assert index.page(10, tenant="").jobs == []  # a tenant-bound caller without a tenant sees nothing


def test_a_page_reads_only_its_scope_and_stops_once_full() -> None:
    index, _ = filled(300)
    seen: list[JobView] = []

    def keep(view: JobView) -> bool:
        seen.append(view)
        return view.seq % 2 == 0

    page = index.page(5, tenant="globex", keep=keep)
    assert {v.spec.tenant for v in seen} == {"globex"}
    # Candidates up to the sixth match (the one that says more are left), no further.
    assert seqs(page.jobs) == [2, 8, 14, 20, 26] and page.more
    assert seen[-1].seq == 32 and len(seen) == 11
    seen.clear()
    newest = index.page(2, queue="acme/vision", newest_first=True, keep=keep)
    assert {v.spec.queue for v in seen} == {"acme/vision"}
    assert seqs(newest.jobs) == [298, 292] and newest.more and seqs(seen) == [298, 295, 292, 289, 286]


def test_an_evolved_job_keeps_its_place_and_filters_see_its_new_phase() -> None:
    index, jobs = filled(9)
    index.put(cancelled(jobs[3]))  # job 4
    assert len(index) == 9 and seqs(index.page(50).jobs) == list(range(1, 10))
    done = index.page(50, keep=lambda v: v.phase is Phase.CANCELLED).jobs
    assert seqs(done) == [4] and done[0].phase is Phase.CANCELLED
    pending = index.page(50, tenant=jobs[3].spec.tenant, keep=lambda v: v.phase is Phase.PENDING).jobs
    assert 4 not in seqs(pending)


def test_a_forgotten_job_leaves_every_scope_and_forgetting_twice_changes_nothing() -> None:
    index, jobs = filled(6)
    globex = [j for j in jobs if j.spec.tenant == "globex"]
    for view in globex:
        index.forget(view)
    index.forget(globex[0])
    assert len(index) == 6 - len(globex)
    assert index.page(10, tenant="globex").jobs == [] and index.page(10, queue="globex").jobs == []
    assert "globex" not in {v.spec.tenant for v in index.page(10).jobs}
    index.put(globex[0])  # seen again (a replay from the start): back in its place
    assert seqs(index.page(10, tenant="globex").jobs) == [globex[0].seq]
    assert seqs(index.page(10).jobs) == sorted([j.seq for j in jobs if j not in globex[1:]])


def test_a_job_numbered_below_the_last_goes_to_its_place() -> None:
    index = JobIndex()
    for n in (1, 5, 3, 4, 2):
        index.put(job(n, "acme"))
    assert seqs(index.page(10).jobs) == [1, 2, 3, 4, 5]
    assert seqs(index.page(10, queue="acme", newest_first=True).jobs) == [5, 4, 3, 2, 1]


def _stored(event: JobEvent, position: int, version: int, seq: int | None = None) -> StoredEvent:
    """The event as the store holds it (Avro, the seq in the metadata of a submission)."""
    name, record = event_name(event), body(event)
    key = str(record[EVENTS[name].key])
    envelope = new_envelope("scheduling", key, event_id=uuid.uuid4(), occurred_at=T0)
    return StoredEvent(
        job_stream(record["job_id"]),
        version,
        position,
        uuid.uuid4(),
        name,
        encode(name, {**envelope, **record}),
        T0,
        {} if seq is None else {"seq": seq},
    )


def test_the_projection_keeps_its_index_as_it_applies_events() -> None:
    projection = Projection()
    views = [job(n) for n in range(1, 7)]
    projection.apply_all(
        _stored(JobSubmitted(v.id, v.spec), position=n, version=1, seq=v.seq) for n, v in enumerate(views, 1)
    )
    projection.apply(_stored(JobCancelled(views[0].id, "enough"), position=7, version=2))
    listed = projection.index.page(10).jobs
    assert [v.id for v in listed] == [v.id for v in views]
    assert listed[0] is projection.jobs[views[0].id] and listed[0].phase is Phase.CANCELLED
    assert [v.id for v in projection.index.page(10, tenant="globex").jobs] == [
        v.id for v in views if v.spec.tenant == "globex"
    ]


def test_pages_stay_right_while_most_jobs_are_forgotten() -> None:
    index, jobs = filled(3000)
    for view in jobs[:2000]:
        index.forget(view)
    assert len(index) == 1000
    assert (
        seqs(index.page(3, tenant="globex").jobs)
        == [v.seq for v in jobs[2000:] if v.spec.tenant == "globex"][:3]
    )
    assert seqs(index.page(5000).jobs) == list(range(2001, 3001))
    assert seqs(index.page(2, after=2500, newest_first=True).jobs) == [2499, 2498]
