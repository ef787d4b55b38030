"""Taking jobs: how many to claim now (the room), the claim, and what each claimed job becomes (an
Attempt, held from then on and handed to the runners).

The main loop (pgwork.worker.runtime) claims through here, and so does a finisher's write that
carries the next claim (pgwork.worker.claims.ClaimRoom asks `room` and gives what it got to `took`).
"""

from __future__ import annotations

import threading
import time

from pgwork.db import Queue
from pgwork.errors import PgworkError
from pgwork.models import ClaimedJob
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.claims import ahead_pays, claim_size, held_back, recent_run, wake_below
from pgwork.worker.describe import usable_trace_context
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import Job
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.options import WorkerOptions
from pgwork.worker.plan import HandlerPlan
from pgwork.worker.runners import Runners


class Taking:
    def __init__(
        self,
        queue: Queue,
        options: WorkerOptions,
        plan: HandlerPlan,
        holdings: Holdings,
        *,
        metrics: WorkerMetrics,
        stop: threading.Event,
    ) -> None:
        self.queue = queue
        self.options = options
        self.job_types = plan.job_types
        self._handlers = plan.handlers
        self.in_process = plan.in_process
        self._per_slot = plan.per_slot
        self._holdings = holdings
        self._metrics = metrics
        self._stop = stop
        # Jobs held at most, waiting or running: the slots' and one batch ahead (plan.claim_ahead).
        self.holds = options.concurrency * plan.per_slot + plan.ahead
        # Plain handlers at a large --batch: one whole batch more, once the last claim came back
        # full, while the jobs run quickly enough for that to pay (claims.ahead_pays).
        self._ahead, self._full = plan.whole_ahead, False
        self._run_seconds: float | None = None  # the handlers' recent mean run time a job (claims.recent_run)
        self._runners: Runners | None = None
        self.claim_ok = False  # the last claim reached the database (readiness)
        self.claims = 0  # jobs claimed so far
        self.looked_again = False  # a burst worker's empty claim was followed by a second look

    def attach(self, runners: Runners) -> None:
        """The runners the claimed jobs go to (made after this: they are sized by `holds`)."""
        self._runners = runners

    def room(self) -> int:
        """How many jobs to claim now (none once stopping)."""
        if self._stop.is_set():
            return 0
        held = self._holdings.counts()
        return claim_size(
            self.holds,
            max(self.options.batch, self._per_slot),
            waiting=held[AttemptState.WAITING],
            running=held[AttemptState.RUNNING],
            finishing=held[AttemptState.FINISHING],
            ahead=self._ahead if self._full else 0,
        )

    def claimed_full(self, full: bool) -> None:
        """After the main loop's claim: a full one lets the next batch be claimed ahead (if this
        worker claims ahead at all: plan.whole_batch_ahead, and its jobs run quickly enough:
        claims.ahead_pays), one that was not stops that."""
        o = self.options
        full = full and ahead_pays(self._run_seconds, o.batch, o.concurrency)
        if self._ahead and full != self._full and self._runners is not None:
            self._full = full
            self._runners.wake_below(wake_below(self.holds, o.batch, o.concurrency, self._ahead if full else 0))

    def ran(self, seconds: float, jobs: int) -> None:
        """A written batch's mean run time a job, over `jobs` jobs (pgwork.worker.bookkeeping),
        for claims.ahead_pays."""
        self._run_seconds = recent_run(self._run_seconds, seconds, jobs)

    def held_back(self) -> bool:
        """A burst worker's empty claim: are ready jobs left that it should claim again (claims.held_back)?"""
        try:
            return held_back(self.queue.stats(self.job_types, cap=1), looked_again=self.looked_again)
        except (*TRANSIENT, PgworkError):
            return True  # cannot tell: poll again rather than exit with the backlog undrained

    def claim(self, limit: int) -> list[ClaimedJob]:
        started = time.perf_counter()
        claimed = self.queue.claim(
            self.options.worker_id, job_types=self.job_types, limit=limit, lease=self.options.lease
        )
        self._metrics.claim_duration.observe(time.perf_counter() - started)
        return claimed

    def took(self, claimed: list[ClaimedJob], seconds: float | None) -> None:
        """Hold jobs a claim brought (the main loop's, or one that rode on a finish: `seconds`
        is then its round trip, for the claim-latency histogram)."""
        if seconds is not None:
            self._metrics.claim_duration.observe(seconds)
        self.claim_ok = True
        self.claims += len(claimed)
        attempts = [self._hold(job) for job in claimed]
        self._holdings.add_many(attempts)  # heartbeated from now on
        assert self._runners is not None, "Taking.attach(runners) before the first claim"
        self._runners.submit_many(attempts)
        self._metrics.in_flight.set(len(self._holdings))  # per batch, not per job

    def _hold(self, claimed: ClaimedJob) -> Attempt:
        """A claimed job's attempt; the caller holds it (Holdings.add_many) and hands it to the runners."""
        job = Job(
            id=claimed.id,
            job_type=claimed.job_type,
            payload=claimed.payload if isinstance(claimed.payload, dict) else {},
            attempt=claimed.attempt,
            max_attempts=claimed.max_attempts,
            idempotency_key=claimed.idempotency_key,
            trace_context=usable_trace_context(claimed),
            last_checkpoint=claimed.checkpoint,
        )
        spec, on_loop = self._handlers[claimed.job_type]
        queue = self.queue
        attempt = Attempt(claimed, job, self.options.lease, spec, spec.backoff or queue.backoff, on_loop=on_loop)
        attempt.in_process = claimed.job_type in self.in_process
        job.saver = lambda state: queue.checkpoint(attempt.lease, state)
        job.parent_reader = lambda: {p.parent_id: (p.status, p.result) for p in queue.parent_results(job.id)}
        return attempt
