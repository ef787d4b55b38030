"""Claiming: how many jobs to claim now, and who claims next.

`claim_size` and `held_back` are pure. The gate decides who claims: the main loop, or the finisher
in the same round trip as its write. A one-job worker that finishes a job has exactly one free
slot, and the claim that fills it can ride on the finish (pgwork.db.roundtrip). The gate makes the
two claimers take turns, so the worker never holds more than its capacity: whoever claims holds the
gate from reading the room to holding the jobs claimed. Once a stop is requested the gate closes
for good and no claim starts; the drain waits for one under way, so every job it brought is held
before the drain releases what has not started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pgwork.models import ClaimedJob, TypeStats

# Claiming a whole batch ahead, jobs held plus outcomes waiting for their write may reach this
# many capacities (and the batch ahead) before claiming waits for the writer. A write of a batch's
# outcomes takes a few milliseconds, in which quick jobs end about another batch: at two capacities
# the next claim waited for that write, so claim and write took turns instead of overlapping.
# Issue 28, `--batch 100 --concurrency 16` draining 30,000 trivial jobs on PostgreSQL 15: four
# capacities faster than two in 12 of 13 interleaved rounds (per-round ratio median 1.05,
# 0.95-1.09); with no bound at all it was 3-11% slower (4 rounds).
AHEAD_PENDING_CAPACITIES = 4


def claim_size(concurrency: int, batch: int, *, waiting: int, running: int, finishing: int = 0, ahead: int = 0) -> int:
    """Jobs to claim in the next statement: none while the runners still have at least one job
    each queued (claiming more would only hold leases idle), else enough to fill the worker's
    capacity of max(concurrency, batch) jobs waiting or running, and never more than `batch` at
    once. Jobs whose outcome waits to be written (`finishing`) free their runner at once, but
    back-pressure holds: with more than one capacity of them pending, claiming waits for the
    writes, so a writer that falls behind never lets the worker hoard leases.

    `ahead` (plain handlers at a large batch, pgwork.worker.plan.claim_ahead): up to that many
    jobs more may be held, claimed only as one whole batch once the jobs in hand fit in the
    capacity, so the next batch's claim overlaps the current batch's run instead of following it;
    the writer's back-pressure then allows AHEAD_PENDING_CAPACITIES, so it overlaps the last
    batch's write too."""
    if ahead:
        capacity = max(concurrency, batch)
        held = waiting + running
        pending = AHEAD_PENDING_CAPACITIES * capacity + ahead
        fits = held + batch <= capacity + ahead and held + finishing + batch <= pending
        return batch if fits else 0
    if waiting >= concurrency:
        return 0
    capacity = max(concurrency, batch)
    room = min(capacity - waiting - running, 2 * capacity - waiting - running - finishing)
    return max(0, min(batch, room))


def wake_below(holds: int, batch: int, concurrency: int, ahead: int) -> int:
    """How few jobs queued for the runners wake the main loop to claim (pure): fewer than `holds`
    (claim_size's first rule), or, with a whole batch `ahead`, as soon as the jobs in hand (those
    queued and at most `concurrency` running) fit in the capacity, so the next batch's claim
    starts while a full batch is still to run."""
    return max(holds, batch) - concurrency + 1 if ahead else holds


# A whole batch ahead (plan.whole_batch_ahead) hides one claim's round trip per batch: a few
# milliseconds. Once the batch takes longer than this to run in the slots, that is a few percent at
# most, and the batch held ahead would only keep jobs leased that another worker could start now.
AHEAD_MAX_BATCH_SECONDS = 0.1


def ahead_pays(run_seconds: float | None, batch: int, concurrency: int) -> bool:
    """Whether claiming a whole batch ahead is worth its leases (pure): only while a batch runs in
    the slots within AHEAD_MAX_BATCH_SECONDS, by the handlers' recent run time a job (None: no job
    has finished yet, so no batch is claimed ahead until one has)."""
    if run_seconds is None:
        return False
    return run_seconds * batch / max(1, concurrency) <= AHEAD_MAX_BATCH_SECONDS


# How many jobs' run times the recent mean weighs (recent_run): a written batch of this many
# replaces it, one job moves it a hundredth of the way.
RUN_WINDOW_JOBS = 100


def recent_run(previous: float | None, mean: float, jobs: int) -> float:
    """The handlers' recent run time a job, for ahead_pays (pure): `previous` moved towards a
    written batch's `mean` by that batch's share of RUN_WINDOW_JOBS. A job written alone moves it
    a hundredth of the way, so one slow job among quick ones turns claiming ahead off only when it
    ran a hundred times past ahead_pays' bound; a run of slow ones turns it off sooner."""
    if previous is None or jobs >= RUN_WINDOW_JOBS:
        return mean
    return previous + (mean - previous) * max(jobs, 0) / RUN_WINDOW_JOBS


def held_back(stats: Iterable[TypeStats], *, looked_again: bool = False) -> bool:
    """Whether a burst worker whose claim came back empty should claim again instead of exiting
    with the backlog undrained (pure): ready jobs of these types wait on a fleet-wide limit (other
    workers hold the type's slots, or its rate is spent), or, once, ready jobs the claim did not
    see. That happens when the ready ring's rotation moved them while the claim read (TRUNCATE is
    not MVCC-safe: the claim's snapshot sees the old segment empty and not yet the new rows), or
    another session's claim or cancel held their rows for a moment. A second empty claim in a row
    with nothing limited exits: a job no claim can see never keeps a burst worker alive."""
    limited = any(s.ready > 0 and (s.max_running is not None or s.rate_count is not None) for s in stats)
    return limited or (not looked_again and any(s.ready > 0 for s in stats))


@dataclass(frozen=True)
class ClaimRoom:
    """What a claim needs: who claims which types for how long, the room to claim into now
    (claim_size; 0 once stopping), and how to hold what came back (with the
    round trip's seconds, for the claim-latency histogram)."""

    owner: str
    job_types: list[str]
    lease: float
    room: Callable[[], int]
    hold: Callable[[list[ClaimedJob], float], None]


class ClaimGate:
    def __init__(self, claim: ClaimRoom) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self.claim = claim

    def enter(self) -> bool:
        """Take the turn to claim without waiting; False while another claim is under way or
        once the gate is closed."""
        if not self._lock.acquire(blocking=False):
            return False
        if self._closed:
            self._lock.release()
            return False
        return True

    def leave(self) -> None:
        self._lock.release()

    def close(self, timeout: float) -> bool:
        """No claim starts from now on; wait up to `timeout` seconds for one under way to hold
        its jobs. False: it did not end in time."""
        entered = self._lock.acquire(timeout=max(0.0, timeout))
        self._closed = True
        if entered:
            self._lock.release()
        return entered
