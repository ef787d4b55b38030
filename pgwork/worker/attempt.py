"""One claimed job's attempt, from the claim to its finish: the one record the worker keeps of it.

The main loop makes it from the claim (pgwork.worker.runtime) and holds it (pgwork.worker.holdings:
heartbeated from then on); a runner calls its handler (pgwork.worker.calls), which sets its span
and decision; the watchdog reads its deadline (pgwork.worker.timeouts) and may decide it instead;
the finisher writes the decision (pgwork.worker.finishes) and the bookkeeper ends the span and lets
it go (pgwork.worker.bookkeeping). Every change of its state happens under its lock, so a finish
and a shutdown release never both write.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import trace

from pgwork.backoff import Backoff
from pgwork.models import ClaimedJob, Lease
from pgwork.worker.job import Job
from pgwork.worker.outcome import Decision, Ended
from pgwork.worker.registry import HandlerSpec


class AttemptState(enum.Enum):
    WAITING = "waiting"  # claimed, no runner yet (a batch larger than --concurrency)
    RUNNING = "running"  # the handler is working on it
    FINISHING = "finishing"  # the outcome is decided; its write is pending (still heartbeated)
    RELEASED = "released"  # given back on shutdown; the runner must write nothing


@dataclass
class Attempt:
    claimed: ClaimedJob
    job: Job
    lease_seconds: float
    # The handler's registration, and the backoff that spaces this job type's retries (the
    # handler's own, else the worker's default).
    spec: HandlerSpec | None = None
    backoff: Backoff = field(default_factory=Backoff)
    on_loop: bool = False  # an `async def` handler's attempt: a task on the event loop
    claimed_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None  # monotonic, when its handler was called
    ran: float | None = None  # seconds from its handler's call to its decision
    # When the lease lapses by our own clock if no renewal lands: past it, a finish gives up.
    lease_deadline: float = 0.0
    state: AttemptState = AttemptState.WAITING
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set as the handler starts (the watchdog reads them): the attempt's hard timeout (None:
    # none), its monotonic deadline, and the runner thread (None on the event loop).
    timeout: float | None = None
    deadline: float | None = None
    runner: threading.Thread | None = None
    span: trace.Span | None = None
    # How a batch handler's call ended for this job, until it is decided (one job's call decides
    # at once and never sets it).
    ended: Ended | None = None
    # What to write, once decided (by the runner, or by the watchdog for an abandoned handler).
    decision: Decision | None = None
    # The watchdog told the handler to stop; then gave up on its thread and decided without it.
    told: bool = False
    abandoned: bool = False
    # Process isolation (pgwork.worker.children): its handler runs in a child process, and while
    # it does, `kill` kills that child (the watchdog's answer to a handler past its grace).
    in_process: bool = False
    kill: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        if not self.lease_deadline:
            self.lease_deadline = self.claimed_at + self.lease_seconds

    @property
    def id(self) -> int:
        return self.claimed.id

    @property
    def job_type(self) -> str:
        return self.claimed.job_type

    @property
    def lease(self) -> Lease:
        return self.claimed.lease

    def retry_delay(self) -> float:
        """Seconds before a failed attempt's retry, by the handler's backoff."""
        return self.backoff.delay(self.job.attempt)

    def transition(self, expected: set[AttemptState], new: AttemptState) -> bool:
        """Move to `new` if in one of `expected`; False (and no change) otherwise."""
        with self.lock:
            if self.state not in expected:
                return False
            self.state = new
            return True
