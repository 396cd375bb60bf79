"""The projection's jobs in submission order, per tenant and per queue, for ListJobs.

A list page is one bisect into its scope's sequence numbers and a walk from there that stops once the page
is full, so one tenant's listing costs what its own jobs cost, not what every tenant's history does
(issue 13). The index is kept as the projection applies events: a submission adds the job, every later
event replaces the job's view (scope and place never change, its phase does), and a forgotten job leaves
every list it was in.

Retention forgets the oldest finished jobs one by one, near the front of lists of 100,000s: deleting
each from every list would move the lists' tails each time. A forgotten job loses only its view at once;
its numbers stay in the lists, skipped by pages, until as many are dead as alive, when every list is
rebuilt without them (amortised O(1) per forget, and a page walks past at most that many).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from suanli.scheduling.domain.jobs import JobView

# Forgotten numbers tolerated in the lists before a rebuild, however few jobs are left.
COMPACT_FLOOR = 1024


@dataclass(frozen=True, slots=True)
class Page:
    """The jobs of one page, in the order asked, and whether a matching job is left past the last."""

    jobs: list[JobView]
    more: bool


class JobIndex:
    """Sequence numbers (the FIFO place each submission gets, unique) of every job, of each tenant's and
    of each queue's, ascending; and the current view of each job by its number."""

    def __init__(self) -> None:
        self._views: dict[int, JobView] = {}
        self._all: list[int] = []
        self._by_tenant: dict[str, list[int]] = {}
        self._by_queue: dict[str, list[int]] = {}
        self._dead: set[int] = set()  # numbers of forgotten jobs still in the lists

    def __len__(self) -> int:
        return len(self._views)

    def put(self, job: JobView) -> None:
        """Record a job submitted or evolved (its new view replaces the old one)."""
        known = job.seq in self._views
        self._views[job.seq] = job
        if known:
            return
        if job.seq in self._dead:  # forgotten and seen again (a replay): its numbers are still in place
            self._dead.discard(job.seq)
            return
        for seqs in self._lists(job):
            _insert(seqs, job.seq)

    def forget(self, job: JobView) -> None:
        """Drop a job from every list (retention that evicts it from the projection calls this)."""
        if self._views.pop(job.seq, None) is None:
            return
        self._dead.add(job.seq)
        if len(self._dead) > max(COMPACT_FLOOR, len(self._views)):
            self._compact()

    def _compact(self) -> None:
        """Every list without the numbers of forgotten jobs; a scope left empty goes."""
        views = self._views
        self._all = [seq for seq in self._all if seq in views]
        for scope in (self._by_tenant, self._by_queue):
            for key, seqs in list(scope.items()):
                kept = [seq for seq in seqs if seq in views]
                if kept:
                    scope[key] = kept
                else:
                    del scope[key]
        self._dead.clear()

    def page(
        self,
        size: int,
        *,
        queue: str = "",
        tenant: str | None = None,
        after: int | None = None,
        newest_first: bool = False,
        keep: Callable[[JobView], bool] | None = None,
    ) -> Page:
        """Up to ``size`` jobs of one scope past the job numbered ``after`` (None: from the start) that
        ``keep`` keeps (default all). The scope is ``queue`` (that queue alone, not the ones below it)
        when given, else ``tenant``'s jobs, else (tenant None) every job."""
        seqs = self._scope(queue, tenant)
        found: list[JobView] = []
        views = self._views
        for seq in _walk(seqs, after, newest_first):
            job = views.get(seq)
            if job is None:  # forgotten, its number not yet compacted away
                continue
            if keep is not None and not keep(job):
                continue
            if len(found) == size:
                return Page(found, True)
            found.append(job)
        return Page(found, False)

    def _scope(self, queue: str, tenant: str | None) -> list[int]:
        if queue:
            return self._by_queue.get(queue, [])
        if tenant is not None:
            return self._by_tenant.get(tenant, [])
        return self._all

    def _lists(self, job: JobView) -> tuple[list[int], ...]:
        return (
            self._all,
            self._by_tenant.setdefault(job.spec.tenant, []),
            self._by_queue.setdefault(job.spec.queue, []),
        )


def _insert(seqs: list[int], seq: int) -> None:
    # Submissions are applied in commit order, which is their numbering order: appending is the rule.
    if not seqs or seqs[-1] < seq:
        seqs.append(seq)
    else:
        insort(seqs, seq)


def _walk(seqs: list[int], after: int | None, newest_first: bool) -> Iterator[int]:
    """The numbers of ``seqs`` strictly past ``after`` in the order asked, by index: no copy of the list."""
    if newest_first:
        end = len(seqs) if after is None else bisect_left(seqs, after)
        return (seqs[i] for i in range(end - 1, -1, -1))
    start = 0 if after is None else bisect_right(seqs, after)
    return (seqs[i] for i in range(start, len(seqs)))
