"""The jobs one worker holds: claimed, waiting for a runner, running, or finishing.

Shared by the main loop, the runner threads and the heartbeat thread; every change of a held
job's state happens under that job's lock, so a finish and a shutdown release never both write.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field

from opentelemetry import trace

from pgwork.models import ClaimedJob, Lease
from pgwork.worker.registry import Job


class HeldState(enum.Enum):
    WAITING = "waiting"  # claimed, no runner yet (a batch larger than --concurrency)
    RUNNING = "running"  # the handler is working on it
    FINISHING = "finishing"  # the outcome is decided; its write is pending (still heartbeated)
    RELEASED = "released"  # given back on shutdown; the runner must write nothing


@dataclass
class Held:
    claimed: ClaimedJob
    job: Job
    lease_seconds: float
    claimed_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None  # monotonic, when its handler was called (set by the runner)
    # When the lease lapses by our own clock if no renewal lands: past it, a finish gives up.
    lease_deadline: float = 0.0
    state: HeldState = HeldState.WAITING
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set by the runner as the handler starts (pgwork.worker.watchdog reads them): the attempt's
    # hard timeout (None: none), its monotonic deadline, the runner thread and the job's span.
    timeout: float | None = None
    deadline: float | None = None
    runner: threading.Thread | None = None
    span: trace.Span | None = None
    # The watchdog told the handler to stop; then gave up on its thread and wrote the outcome.
    told: bool = False
    abandoned: bool = False

    def __post_init__(self) -> None:
        if not self.lease_deadline:
            self.lease_deadline = self.claimed_at + self.lease_seconds

    @property
    def lease(self) -> Lease:
        return self.claimed.lease

    def transition(self, expected: set[HeldState], new: HeldState) -> bool:
        """Move to `new` if in one of `expected`; False (and no change) otherwise."""
        with self.lock:
            if self.state not in expected:
                return False
            self.state = new
            return True


class Holdings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, Held] = {}
        self.changed = threading.Condition(self._lock)

    def add(self, held: Held) -> None:
        with self._lock:
            self._held[held.claimed.id] = held
            self.changed.notify_all()

    def remove(self, job_id: int) -> None:
        with self._lock:
            self._held.pop(job_id, None)
            self.changed.notify_all()

    def snapshot(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def get(self, job_id: int) -> Held | None:
        with self._lock:
            return self._held.get(job_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def count(self, state: HeldState) -> int:
        with self._lock:
            return sum(1 for h in self._held.values() if h.state is state)

    def wait_until_empty_or(self, deadline: float, interrupted: threading.Event) -> bool:
        """Block until nothing is running (WAITING/RUNNING/FINISHING), the monotonic deadline
        passes, or `interrupted` is set. True if everything finished."""
        with self._lock:
            while self._held:
                if interrupted.is_set():
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(min(remaining, 0.1))
            return True
