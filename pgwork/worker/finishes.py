"""The executor of outcomes: one thread that writes what runners decided, a batch at a time.

Runners hand over each decided outcome (pgwork.worker.outcome) and go back to work. This thread
collects them and writes every few milliseconds, or at once when no runner is busy (so a
one-job worker does not wait): the successes through succeed_many and the failures through
fail_many in one transaction, each fenced by its own token, each result row in the transaction
that marks its job succeeded. Until its write lands a job stays held (and heartbeated). A write
that keeps failing on a lost connection is retried until the job's lease would have lapsed or
the shutdown deadline, whichever is first; then the row is left to the reaper.

When the worker has room for more jobs and is not stopping, the write also claims them, in the
same round trip (pgwork.db.roundtrip; the gate, pgwork.worker.claimgate, keeps the main loop
from claiming at the same time). If that pipelined write fails, nothing was claimed and the
batch is written again the usual way; the main loop then claims, with its own error handling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import psycopg
from opentelemetry import trace

from pgwork import tracing
from pgwork.db import Queue
from pgwork.db.batches import DecidedFailure, StoredSuccess
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, Failure
from pgwork.worker.claimgate import ClaimGate
from pgwork.worker.describe import first_line
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.holdings import Held
from pgwork.worker.outcome import Decision, Outcome, after_failure, after_success, lost, refused_result

log = logging.getLogger("pgwork.worker")

T = TypeVar("T")
# How long a decided outcome may wait for others to share its write while runners are busy.
LINGER_SECONDS = 0.005
# Most outcomes written in one transaction.
MAX_BATCH = 1000


@dataclass
class Pending:
    held: Held
    decision: Decision
    span: trace.Span | None


Done = Callable[[list[tuple[Pending, Outcome]]], None]


def retry_write(
    held: Held, what: str, write: Callable[[], T], shutdown_deadline: Callable[[], float | None]
) -> T | None:
    """Run a fenced write, retrying lost connections until the lease would have lapsed or, once
    stopping, until the shutdown deadline, whichever comes first. None: gave up."""
    pause = 0.1
    while True:
        try:
            return write()
        except TRANSIENT as exc:
            shutdown = shutdown_deadline()
            give_up = held.lease_deadline if shutdown is None else min(held.lease_deadline, shutdown)
            if time.monotonic() + pause >= give_up:
                why = "its lease lapsed" if give_up == held.lease_deadline else "the shutdown deadline"
                log.error(
                    "job %s: could not %s before %s (%s); the row stays running and the reaper "
                    "returns it once the lease lapses",
                    held.claimed.id,
                    what,
                    why,
                    first_line(exc),
                )
                return None
            log.warning("job %s: could not %s (%s); retrying in %gs", held.claimed.id, what, first_line(exc), pause)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


class Finisher(threading.Thread):
    def __init__(
        self,
        queue: Queue,
        done: Done,
        busy: Callable[[], bool],
        shutdown_deadline: Callable[[], float | None],
        *,
        linger: float = LINGER_SECONDS,
        gate: ClaimGate | None = None,
        inline: bool = False,
    ) -> None:
        super().__init__(name="pgwork-finisher", daemon=True)
        self._queue = queue
        self._done = done
        self._busy = busy
        self._deadline = shutdown_deadline
        self._linger = linger
        self._pending: list[Pending] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._writing = False
        self._gate = gate
        self._inline = inline
        self.flushes = 0
        self.pipelined_claims = 0  # writes that also claimed (tests, the lab)

    def claims_next(self) -> bool:
        """True while a write is pending or under way that will claim into any free room: the
        main loop leaves the claim to it (one round trip instead of two)."""
        with self._cond:
            return self._gate is not None and (bool(self._pending) or self._writing)

    def submit(self, item: Pending, *, may_write: bool = True) -> bool:
        """Hand over a decided outcome. A one-job worker's runner (`inline`) writes it itself
        when nothing else is pending, and the claim riding on it queues the next job for that
        same runner: no thread hand-off on the way from one job to the next. True: written.
        `may_write` False: never on the caller's thread (the event loop, which a write and its
        retries would block)."""
        with self._cond:
            inline = may_write and self._inline and not self._pending and not self._writing and not self._stopping
            if not inline:
                self._pending.append(item)
                # Woken once per batch, not per outcome: the first one starts the linger (the
                # runners going idle, pgwork.worker.runners, or a full batch ends it early).
                if len(self._pending) == 1 or len(self._pending) >= MAX_BATCH:
                    self._cond.notify()
                return False
            self._writing = True
        self._flush([item])
        return True

    def poke(self) -> None:
        """A runner went idle: if nothing else is running, write now rather than linger."""
        with self._cond:
            self._cond.notify()

    def stop(self) -> None:
        """Write what is pending, then end."""
        with self._cond:
            self._stopping = True
            self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending and self._stopping:
                    return
                until = time.monotonic() + self._linger
                while (
                    not self._stopping
                    and len(self._pending) < MAX_BATCH
                    and self._busy()
                    and (left := until - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                self._writing = True
            self._flush(batch)

    def _flush(self, batch: list[Pending]) -> None:
        """Write a batch taken with `_writing` set, then let its jobs go."""
        try:
            answers = self.write(batch)
        except Exception:  # the thread must live on: the rows are left to the reaper
            log.exception("writing %d outcome(s) failed unexpectedly; the reaper will return them", len(batch))
            answers = [(p, Outcome.LEASE_LOST) for p in batch]
        with self._cond:
            self._writing = False
        self._done(answers)  # wakes the main loop, which may have left a claim to this write
        self.flushes += 1

    # -- applying decisions ----------------------------------------------------------------

    def write(self, batch: list[Pending]) -> list[tuple[Pending, Outcome]]:
        answers: list[tuple[Pending, Outcome]] = []
        writes: list[Pending] = []
        for p in batch:
            outcome = p.decision.outcome
            if outcome is Outcome.CANCELLED:
                acked = retry_write(
                    p.held,
                    "acknowledge the cancellation",
                    lambda p=p: self._queue.acknowledge_cancel(p.held.lease),  # type: ignore[misc]
                    self._deadline,
                )
                answers.append((p, Outcome.CANCELLED if acked else self._lose(p)))
            elif outcome in (Outcome.SUCCEEDED, Outcome.RETRY, Outcome.DEAD):
                writes.append(p)
            elif outcome is Outcome.LEASE_LOST:
                answers.append((p, self._lose(p)))
            else:
                answers.append((p, outcome))
        if writes:
            claimed = self._write_and_claim(writes)
            answers.extend(claimed if claimed is not None else self._write_many(writes))
        return answers

    def _write_and_claim(self, writes: list[Pending]) -> list[tuple[Pending, Outcome]] | None:
        """The batch's write and a claim into the room free now, in one round trip. None: not
        done (no gate, no room, another claim under way, or the write failed: nothing claimed)."""
        if self._gate is None or not self._gate.enter():
            return None
        try:
            claim = self._gate.claim
            room = claim.room()
            if room <= 0:
                return None
            successes, failures = _split(writes)
            started = time.perf_counter()
            try:
                finished = self._queue.finish_then_claim(
                    successes, failures, claim.owner, job_types=claim.job_types, limit=room, lease=claim.lease
                )
            except Exception as exc:  # written again the usual way, with its retries and splits
                log.info("finishing %d job(s) and claiming failed (%s); writing alone", len(writes), first_line(exc))
                return None
            if finished.claimed is None:
                log.warning(
                    "claim after finishing failed (%s); the main loop claims",
                    first_line(finished.claim_error or RuntimeError("no answer")),
                )
            else:
                claim.hold(finished.claimed, time.perf_counter() - started)
                self.pipelined_claims += 1
            return self._answers(writes, finished.completions, finished.failures)
        finally:
            self._gate.leave()

    def _write_many(self, writes: list[Pending]) -> list[tuple[Pending, Outcome]]:
        # The batch's writes share one transaction: retry it until the first of its leases
        # would lapse; a job that cannot wait longer is given up alone.
        first = min(writes, key=lambda p: p.held.lease_deadline)
        try:
            written = retry_write(first.held, "record the outcome", lambda: self._finish(writes), self._deadline)
        except (psycopg.DataError, InvalidArgument) as exc:
            if len(writes) > 1:
                return [answer for p in writes for answer in self._write_many([p])]
            return self._refused(writes[0], exc)
        if written is None:
            return [(p, self._lose(p)) for p in writes]
        return written

    def _finish(self, writes: list[Pending]) -> list[tuple[Pending, Outcome]]:
        completions, failed = self._queue.finish_many(*_split(writes))
        return self._answers(writes, completions, failed)

    def _answers(
        self, writes: list[Pending], completions: dict[int, Completion], failed: dict[int, Failure]
    ) -> list[tuple[Pending, Outcome]]:
        answers = []
        for p in writes:
            job_id = p.held.claimed.id
            if job_id in completions:
                outcome = after_success(completions[job_id])
            else:
                outcome = after_failure(failed[job_id].outcome)
            answers.append((p, self._lose(p) if outcome is Outcome.LEASE_LOST else outcome))
        return answers

    def _refused(self, p: Pending, exc: Exception) -> list[tuple[Pending, Outcome]]:
        """The database refused this job's result (a case result_json missed): a permanent
        failure, not a crash that would leave the job to the reaper."""
        job = p.held.job
        p.decision = refused_result(first_line(exc), job.attempt, job.max_attempts, datetime.now(UTC))
        if p.span is not None:
            tracing.mark_error(p.span, "invalid_result", p.decision.message or "")
        return self._write_many([p])

    def _lose(self, p: Pending) -> Outcome:
        p.decision = lost()
        log.warning("job %s: lease lost; result discarded (another worker or the reaper has it)", p.held.claimed.id)
        return Outcome.LEASE_LOST


def _split(writes: list[Pending]) -> tuple[list[StoredSuccess], list[DecidedFailure]]:
    successes = [
        StoredSuccess(p.held.lease, p.decision.result_json or "null")
        for p in writes
        if p.decision.outcome is Outcome.SUCCEEDED
    ]
    failures = [
        DecidedFailure(p.held.lease, p.decision.failure, p.decision.error or "")
        for p in writes
        if p.decision.failure is not None and p.decision.outcome is not Outcome.SUCCEEDED
    ]
    return successes, failures
