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
from collections.abc import Callable
from typing import Any

from pgwork import tracing
from pgwork.logsetup import LineHandler, batch_handler
from pgwork.tables import inert
from pgwork.worker.attempt import Attempt
from pgwork.worker.finishes import Answers
from pgwork.worker.holdings import Holdings
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import Decision, Outcome, lost

log = logging.getLogger("pgwork.worker.jobs")


class Bookkeeper:
    def __init__(
        self,
        metrics: WorkerMetrics,
        holdings: Holdings,
        wake: threading.Event,
        ran: Callable[[float, int], None] | None = None,
    ) -> None:
        """`ran` is told each batch's mean run time a job (its handler's call to its decision)
        and how many jobs that mean is of."""
        self._metrics = metrics
        self._holdings = holdings
        self._wake = wake
        self._ran = ran

    def __call__(self, answers: Answers, wake: bool = True) -> None:
        # Per (job type, outcome): the durations, observed through one labelled child each, and
        # one counter increment: a child lookup takes a lock and costs more than the observation.
        durations: dict[tuple[str, str], list[float]] = {}
        now = time.monotonic()
        out = _Lines()
        ran, timed = 0.0, 0
        try:
            for a, outcome in answers:
                durations.setdefault((a.job_type, outcome.value), []).append(now - a.claimed_at)
                if a.ran is not None:
                    ran, timed = ran + a.ran, timed + 1
                # A lost lease wrote nothing, whatever had been decided.
                decision = lost() if outcome is Outcome.LEASE_LOST else a.decision or Decision(outcome)
                _log(out, a, decision, outcome, now)
                if a.span is not None:
                    if decision.error_type is not None:
                        tracing.mark_error(a.span, decision.error_type, decision.message or "")
                    a.span.set_attribute(tracing.JOB_OUTCOME, outcome.value)
                    a.span.end()
        finally:
            out.flush()  # the lines held for one write
        if self._ran is not None and timed:
            self._ran(ran / timed, timed)
        self._holdings.remove_many([a.id for a, _ in answers])
        for (job_type, label), seconds in durations.items():
            histogram = self._metrics.job_duration.labels(self._metrics.type_label(job_type), label)
            for s in seconds:
                histogram.observe(s)
            self._metrics.jobs_finished.labels(self._metrics.type_label(job_type), label).inc(len(seconds))
            if label == Outcome.LEASE_LOST.value:
                self._metrics.lease_lost.labels(self._metrics.type_label(job_type)).inc(len(seconds))
        self._metrics.in_flight.set(len(self._holdings))
        if wake and not self._wake.is_set():
            self._wake.set()  # a burst worker may be waiting for the last write


def _log(out: _Lines, a: Attempt, decision: Decision, outcome: Outcome, now: float) -> None:
    job = a.job
    if outcome in (Outcome.SUCCEEDED, Outcome.DUPLICATE):
        started = a.started_at if a.started_at is not None else a.claimed_at
        out.line(
            logging.INFO,
            "job %s (%s) attempt %d succeeded in %.3fs%s",
            job.id,
            job.job_type,
            job.attempt,
            now - started,
            " (duplicate: its key already had a result)" if outcome is Outcome.DUPLICATE else "",
        )
    elif outcome is Outcome.CANCELLED and decision.failure is not None:
        # The attempt failed before a heartbeat brought the cancellation: the database ended it
        # cancelled rather than retried (migration 13).
        lines = (decision.error or "").strip().splitlines()
        out.line(
            logging.WARNING,
            "job %s (%s) attempt %d failed -> cancelled (its cancellation was requested): %s",
            job.id,
            job.job_type,
            job.attempt,
            lines[0] if lines else "",
        )
    elif outcome is Outcome.CANCELLED:
        out.line(
            logging.INFO, "job %s (%s) attempt %d cancelled while running; stopped", job.id, job.job_type, job.attempt
        )
    elif outcome in (Outcome.RETRY, Outcome.DEAD):
        lines = (decision.error or "").strip().splitlines()
        out.line(
            logging.WARNING,
            "job %s (%s) attempt %d failed -> %s: %s",
            job.id,
            job.job_type,
            job.attempt,
            outcome.value,
            lines[0] if lines else "",
        )


_LINE = _log.__code__.co_firstlineno


class _Lines:
    """One batch's job lines, each as its own LogRecord would write it.

    Where the lines reach only the command line's own handler (logsetup.batch_handler: a
    `pgwork worker` whose program added no handler or filter), a batch's lines below WARNING are
    formatted there and written in one write at `flush`: the same text, line for line and in
    order, at under a third of a record's cost (issue 28). Otherwise each is a LogRecord through
    the logger's filters and handlers, without `log.log`'s walk up the stack for the caller
    (findCaller, paid per job): a record names `_log` here as its origin. The first record of
    each level is made by the logger (`makeRecord`, so by the record factory in force); the
    batch's later ones copy its attributes and take their own message arguments, as long as
    that factory is logging's own. Either way a batch's lines of one level share one creation
    time (and a record's thread and process): the batch was booked at that instant, on that
    thread. Text arguments (the job type, the error's first line: job data) are made inert here
    too, whatever formatter an embedding program's handler uses (pgwork's own,
    logsetup.LineFormatter, escapes every line)."""

    def __init__(self) -> None:
        self._made: dict[int, dict[str, Any]] = {}
        self._writers: dict[int, LineHandler | None] = {}
        self._held: list[str] = []  # messages written together at `flush`, by `_held_by`
        self._held_by: tuple[LineHandler, int] | None = None

    def line(self, level: int, msg: str, *args: object) -> None:
        if not log.isEnabledFor(level):
            return
        args = tuple(inert(a) if isinstance(a, str) else a for a in args)
        if level not in self._writers:
            self._writers[level] = batch_handler(log, level)
        writer = self._writers[level]
        if writer is not None:
            if self._held and (writer, level) != self._held_by:
                self.flush()  # one write is one handler's lines at one level
            self._held_by = (writer, level)
            self._held.append(msg % args)
            return
        self.flush()  # the lines before this record go out before it
        made = self._made.get(level)
        if made is None:
            record = log.makeRecord(log.name, level, __file__, _LINE, msg, args, None, "_log")
            if logging.getLogRecordFactory() is logging.LogRecord:
                self._made[level] = dict(record.__dict__)  # before a handler adds to it
        else:
            record = _new_record(logging.LogRecord)
            record.__dict__.update(made)
            record.msg, record.args = msg, args
        log.handle(record)

    def flush(self) -> None:
        """Write the lines held for one write."""
        if self._held and self._held_by is not None:
            held, self._held = self._held, []
            writer, level = self._held_by
            writer.write_lines(log.name, level, held)


_new_record = logging.LogRecord.__new__
