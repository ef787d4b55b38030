"""After a batch of outcomes is written: count them (one counter update per job type and
outcome, not per job), close their spans, log one line per job, and let the jobs go.

The per-job lines go to the `pgwork.worker.jobs` logger: a success at INFO (id, type, attempt,
how long the handler ran until its outcome was written), a failure at WARNING with the first line
of its (redacted) error. Never the payload or the result: they may hold personal data, and a log
outlives the job's retention. Quieten them with that logger's level (or PGWORK_LOG_LEVEL)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from pgwork import tracing
from pgwork.worker.finishes import Pending
from pgwork.worker.holdings import Holdings
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import Outcome

log = logging.getLogger("pgwork.worker.jobs")


class Bookkeeper:
    def __init__(self, metrics: WorkerMetrics, holdings: Holdings, wake: threading.Event) -> None:
        self._metrics = metrics
        self._holdings = holdings
        self._wake = wake

    def __call__(self, answers: list[tuple[Pending, Outcome]]) -> None:
        counts: Counter[tuple[str, str]] = Counter()
        now = time.monotonic()
        for p, outcome in answers:
            held = p.held
            job_type = held.claimed.job_type
            counts[(job_type, outcome.value)] += 1
            self._metrics.job_duration.labels(job_type, outcome.value).observe(now - held.claimed_at)
            _log(p, outcome, now)
            if p.span is not None:
                if p.decision.error_type is not None:
                    tracing.mark_error(p.span, p.decision.error_type, p.decision.message or "")
                p.span.set_attribute(tracing.JOB_OUTCOME, outcome.value)
                p.span.end()
            self._holdings.remove(held.claimed.id)
        for (job_type, label), n in counts.items():
            self._metrics.jobs_finished.labels(job_type, label).inc(n)
            if label == Outcome.LEASE_LOST.value:
                self._metrics.lease_lost.labels(job_type).inc(n)
        self._metrics.in_flight.set(len(self._holdings))
        self._wake.set()  # a burst worker may be waiting for the last write


def _log(p: Pending, outcome: Outcome, now: float) -> None:
    job = p.held.job
    if outcome in (Outcome.SUCCEEDED, Outcome.DUPLICATE):
        started = p.held.started_at if p.held.started_at is not None else p.held.claimed_at
        log.info(
            "job %s (%s) attempt %d succeeded in %.3fs%s",
            job.id,
            job.job_type,
            job.attempt,
            now - started,
            " (duplicate: its key already had a result)" if outcome is Outcome.DUPLICATE else "",
        )
    elif outcome is Outcome.CANCELLED and p.decision.failure is not None:
        # The attempt failed before a heartbeat brought the cancellation: the database ended it
        # cancelled rather than retried (migration 13).
        lines = (p.decision.error or "").strip().splitlines()
        log.warning(
            "job %s (%s) attempt %d failed -> cancelled (its cancellation was requested): %s",
            job.id,
            job.job_type,
            job.attempt,
            lines[0] if lines else "",
        )
    elif outcome is Outcome.CANCELLED:
        log.info("job %s (%s) attempt %d cancelled while running; stopped", job.id, job.job_type, job.attempt)
    elif outcome in (Outcome.RETRY, Outcome.DEAD):
        lines = (p.decision.error or "").strip().splitlines()
        log.warning(
            "job %s (%s) attempt %d failed -> %s: %s",
            job.id,
            job.job_type,
            job.attempt,
            outcome.value,
            lines[0] if lines else "",
        )
