"""The executor of outcomes: one thread that writes what runners decided, a batch at a time.

Runners hand over each decided outcome (pgwork.worker.outcome) and go back to work. This thread
collects them and writes every few milliseconds, or at once when no runner is busy (so a
one-job worker does not wait): the successes through succeed_many and the failures through
fail_many in one transaction, each fenced by its own token, each result row in the transaction
that marks its job succeeded. Until its write lands a job stays held (and heartbeated). A write
that keeps failing on a lost connection is retried until the job's lease would have lapsed or
the shutdown deadline, whichever is first; then the row is left to the reaper.

When the worker has room for more jobs and is not stopping, the write also claims them, in the
same round trip (pgwork.db.roundtrip; the gate, pgwork.worker.claims, keeps the main loop
from claiming at the same time). If that pipelined write fails, nothing was claimed and the
batch is written again the usual way; the main loop then claims, with its own error handling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import psycopg

from pgwork.db import Queue
from pgwork.db.batches import DecidedFailure, StoredSuccess
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, Failure
from pgwork.worker.attempt import Attempt
from pgwork.worker.claims import ClaimGate
from pgwork.worker.describe import first_line
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.outcome import Decision, Outcome, after_failure, after_success, refused_result

log = logging.getLogger("pgwork.worker")

T = TypeVar("T")
# How long a decided outcome may wait for others to share its write while runners are busy.
LINGER_SECONDS = 0.005
# Most outcomes written in one transaction.
MAX_BATCH = 1000


# What the database made of each attempt's decision, a batch at a time.
Answers = list[tuple[Attempt, Outcome]]
# Told the answers, and whether the main loop should look for room to claim into: not when the
# write's own claim filled all the room there was (a one-job worker's every job), as waking it
# to find none costs a thread switch per job.
Done = Callable[[Answers, bool], None]


def retry_write(
    held: Attempt, what: str, write: Callable[[], T], shutdown_deadline: Callable[[], float | None]
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
        self._pending: list[Attempt] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._writing = False
        self._hurry = False  # a pending outcome asked not to linger
        self._gate = gate
        self._inline = inline
        self.flushes = 0
        self.pipelined_claims = 0  # writes that also claimed (tests, the lab)

    def claims_next(self) -> bool:
        """True while a write is pending or under way that will claim into any free room: the
        main loop leaves the claim to it (one round trip instead of two)."""
        with self._cond:
            return self._gate is not None and (bool(self._pending) or self._writing)

    def submit(self, item: Attempt, *, may_write: bool = True) -> bool:
        """Hand over a decided attempt (its `decision` set). A one-job worker's runner (`inline`)
        writes it itself when nothing else is pending, and the claim riding on it queues the next
        job for that same runner: no thread hand-off on the way from one job to the next. True:
        written. `may_write` False: never on the caller's thread (the event loop, which a write
        and its retries would block)."""
        return self.submit_many([item], may_write=may_write)

    def submit_many(self, items: list[Attempt], *, may_write: bool = True, linger: bool = True) -> bool:
        """`submit` for a batch handler's jobs: handed over together, so they share a write.
        `linger` False: a batch call's outcomes, already a batch, are written without waiting
        for others (the write may carry the claim the next call waits for)."""
        with self._cond:
            inline = may_write and self._inline and not self._pending and not self._writing and not self._stopping
            if not inline or len(items) > MAX_BATCH:
                before = len(self._pending)
                self._pending.extend(items)
                self._hurry = self._hurry or not linger
                # Woken once per batch, not per outcome: the first one starts the linger (the
                # runners going idle, pgwork.worker.runners, or a full batch ends it early).
                if before == 0 or len(self._pending) >= MAX_BATCH or not linger:
                    self._cond.notify()
                return False
            self._writing = True
        self._flush(items)
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
                    and not self._hurry
                    and len(self._pending) < MAX_BATCH
                    and self._busy()
                    and (left := until - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                self._hurry = False
                self._writing = True
            self._flush(batch)

    def _flush(self, batch: list[Attempt]) -> None:
        """Write a batch taken with `_writing` set, then let its jobs go."""
        filled = False
        try:
            answers, filled = self._write(batch)
        except Exception:  # the thread must live on: the rows are left to the reaper
            log.exception("writing %d outcome(s) failed unexpectedly; the reaper will return them", len(batch))
            answers = [(a, Outcome.LEASE_LOST) for a in batch]
        with self._cond:
            self._writing = False
        self._done(answers, not filled)  # wakes the main loop, which may have left a claim to this write
        self.flushes += 1

    # -- applying decisions ----------------------------------------------------------------

    def write(self, batch: list[Attempt]) -> Answers:
        """Write each attempt's decision; what the database made of it, per attempt. The
        decisions are not changed here: an answer that differs (a lost lease, a duplicate, a
        cancellation that won) is the outcome returned beside the attempt."""
        return self._write(batch)[0]

    def _write(self, batch: list[Attempt]) -> tuple[Answers, bool]:
        """`write`, and whether a claim riding on it filled all the room there was."""
        answers: Answers = []
        writes: list[Attempt] = []
        for a in batch:
            outcome = _decision(a).outcome
            if outcome is Outcome.CANCELLED:
                acked = retry_write(
                    a,
                    "acknowledge the cancellation",
                    lambda a=a: self._queue.acknowledge_cancel(a.lease),  # type: ignore[misc]
                    self._deadline,
                )
                answers.append((a, Outcome.CANCELLED if acked else self._lose(a)))
            elif outcome in (Outcome.SUCCEEDED, Outcome.RETRY, Outcome.DEAD):
                writes.append(a)
            elif outcome is Outcome.LEASE_LOST:
                answers.append((a, self._lose(a)))
            else:
                answers.append((a, outcome))
        filled = False
        if writes:
            claimed = self._write_and_claim(writes)
            if claimed is None:
                answers.extend(self._write_many(writes))
            else:
                answers.extend(claimed[0])
                filled = claimed[1]
        return answers, filled

    def _write_and_claim(self, writes: list[Attempt]) -> tuple[Answers, bool] | None:
        """The batch's write and a claim into the room free now, in one round trip; True beside
        the answers when the claim filled that room. None: not done (no gate, no room, another
        claim under way, or the write failed: nothing claimed)."""
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
            filled = finished.claimed is not None and len(finished.claimed) >= room
            return self._answers(writes, finished.completions, finished.failures), filled
        finally:
            self._gate.leave()

    def _write_many(self, writes: list[Attempt]) -> Answers:
        # The batch's writes share one transaction: retry it until the first of its leases
        # would lapse; a job that cannot wait longer is given up alone.
        first = min(writes, key=lambda a: a.lease_deadline)
        try:
            written = retry_write(first, "record the outcome", lambda: self._finish(writes), self._deadline)
        except (psycopg.DataError, InvalidArgument) as exc:
            if len(writes) > 1:
                return [answer for a in writes for answer in self._write_many([a])]
            return self._refused(writes[0], exc)
        if written is None:
            return [(a, self._lose(a)) for a in writes]
        return written

    def _finish(self, writes: list[Attempt]) -> Answers:
        completions, failed = self._queue.finish_many(*_split(writes))
        return self._answers(writes, completions, failed)

    def _answers(
        self, writes: list[Attempt], completions: dict[int, Completion], failed: dict[int, Failure]
    ) -> Answers:
        answers = []
        for a in writes:
            done = completions.get(a.id)
            outcome = after_success(done) if done is not None else after_failure(failed[a.id].outcome)
            answers.append((a, self._lose(a) if outcome is Outcome.LEASE_LOST else outcome))
        return answers

    def _refused(self, a: Attempt, exc: Exception) -> Answers:
        """The database refused this job's result (a case result_json missed): the attempt is
        decided again, as a permanent failure, not a crash that would leave the job to the reaper."""
        job = a.job
        a.decision = refused_result(first_line(exc), job.attempt, job.max_attempts, datetime.now(UTC))
        return self._write_many([a])

    def _lose(self, a: Attempt) -> Outcome:
        log.warning("job %s: lease lost; result discarded (another worker or the reaper has it)", a.id)
        return Outcome.LEASE_LOST


def _decision(a: Attempt) -> Decision:
    assert a.decision is not None  # only decided attempts are submitted
    return a.decision


def _split(writes: list[Attempt]) -> tuple[list[StoredSuccess], list[DecidedFailure]]:
    successes = [
        StoredSuccess(a.lease, _decision(a).result_json or "null", _decision(a).followups)
        for a in writes
        if _decision(a).outcome is Outcome.SUCCEEDED
    ]
    failures = [
        DecidedFailure(a.lease, d.failure, d.error or "")
        for a in writes
        if (d := _decision(a)).failure is not None and d.outcome is not Outcome.SUCCEEDED
    ]
    return successes, failures
