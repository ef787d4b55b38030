"""A stopping worker's drain: what it holds goes back to pending, or is given time to finish.

Jobs claimed but not started are released at once; running jobs get the grace, counted from the
stop request (the claim loop may have spent part of it waiting on an unreachable database); then
whatever still runs is told to stop and released (Queue.release: lease cleared, a note in
last_error, attempt_count kept because it counts claims). A second stop request ends the grace at
once. The writes give up at the shutdown deadline, leaving their rows to the reaper.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pgwork.db import Queue
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.claims import ClaimGate
from pgwork.worker.finishes import retry_write
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import StopReason
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import Outcome

log = logging.getLogger("pgwork.worker")

# How long the finishing writes may take to land once the grace is over (bounded by the deadline).
FINISHING_SECONDS = 5.0


class Shutdown:
    def __init__(
        self,
        queue: Queue,
        holdings: Holdings,
        metrics: WorkerMetrics,
        gate: ClaimGate,
        *,
        deadline: Callable[[], float | None],
        remaining: Callable[[], float],
    ) -> None:
        """`deadline`: the monotonic shutdown deadline (None until a stop is requested);
        `remaining`: seconds left before it."""
        self._queue = queue
        self._holdings = holdings
        self._metrics = metrics
        self._gate = gate
        self._deadline = deadline
        self._remaining = remaining

    def drain(self, grace: float, grace_ends: float | None, force: threading.Event, gate_seconds: float) -> None:
        """Release what has not started, wait until `grace_ends` (or `force`) for the rest, then
        release what still runs. `gate_seconds`: how long to wait for a claim under way."""
        holdings = self._holdings
        # No claim starts from here on; one riding on a finish holds its jobs first, so they are
        # released below with the other unstarted ones.
        self._gate.close(min(self._remaining(), gate_seconds))
        for held in holdings.snapshot():
            if held.transition({AttemptState.WAITING}, AttemptState.RELEASED):
                self.release(held, "released unstarted on shutdown")
                holdings.remove(held.claimed.id)
        deadline = grace_ends if grace_ends is not None else time.monotonic() + grace
        if len(holdings):
            log.info("waiting up to %gs for %d running job(s)", grace, len(holdings))
        if holdings.wait_until_empty_or(deadline, force):
            return
        why = "second stop signal" if force.is_set() else f"grace of {grace:g}s ran out"
        for held in holdings.snapshot():
            if held.transition({AttemptState.RUNNING, AttemptState.WAITING}, AttemptState.RELEASED):
                held.job.request_stop(StopReason.SHUTDOWN)
                self.release(held, f"released on shutdown ({why})")
                holdings.remove(held.claimed.id)
        # Finishing writes are short; let them land before the process exits, but only until the
        # shutdown deadline (their retries give up by then too).
        holdings.wait_until_empty_or(time.monotonic() + min(self._remaining(), FINISHING_SECONDS), threading.Event())
        self._metrics.in_flight.set(len(holdings))

    def release(self, held: Attempt, note: str) -> None:
        queue = self._queue
        released = retry_write(held, "release it", lambda: queue.release(held.lease, note), self._deadline)
        if released:
            outcome = Outcome.RELEASED
        elif released is None:
            outcome = Outcome.LEASE_LOST  # gave up writing; the reaper will return it
        else:
            # A release is refused when the lease is gone or a cancellation was requested;
            # the fenced acknowledgement tells the two apart (it matches only a held row).
            acked = retry_write(
                held, "acknowledge the cancellation", lambda: queue.acknowledge_cancel(held.lease), self._deadline
            )
            outcome = Outcome.CANCELLED if acked else Outcome.LEASE_LOST
        log.info("job %s: %s -> %s", held.claimed.id, note, outcome.value)
        self._metrics.finished(held.claimed.job_type, outcome.value, time.monotonic() - held.claimed_at)
