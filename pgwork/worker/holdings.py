"""The attempts one worker holds: claimed, waiting for a runner, running, or finishing.

Shared by the main loop, the runner threads, the watchdog and the heartbeat thread (which renews
what is held here).
"""

from __future__ import annotations

import threading
import time

from pgwork.worker.attempt import Attempt, AttemptState


class Holdings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, Attempt] = {}
        self.changed = threading.Condition(self._lock)
        # Attempts ever added: the heartbeat thread tells a busy worker (one that claimed since it
        # last looked) from an idle one by it, whether or not a job is held at that instant.
        self.added = 0

    def add(self, attempt: Attempt) -> None:
        with self._lock:
            self._held[attempt.id] = attempt
            self.added += 1
            self.changed.notify_all()

    def add_many(self, attempts: list[Attempt]) -> None:
        """`add` for a claim's jobs: one lock and one notification for the batch."""
        with self._lock:
            for attempt in attempts:
                self._held[attempt.id] = attempt
            self.added += len(attempts)
            self.changed.notify_all()

    def remove(self, job_id: int) -> None:
        with self._lock:
            self._held.pop(job_id, None)
            self.changed.notify_all()

    def remove_many(self, job_ids: list[int]) -> None:
        """`remove` for a written batch's jobs: one lock and one notification for the batch."""
        with self._lock:
            for job_id in job_ids:
                self._held.pop(job_id, None)
            self.changed.notify_all()

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self._held.values())

    def get(self, job_id: int) -> Attempt | None:
        with self._lock:
            return self._held.get(job_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def count(self, state: AttemptState) -> int:
        with self._lock:
            return sum(1 for h in self._held.values() if h.state is state)

    def counts(self) -> dict[AttemptState, int]:
        """How many are held in each state, in one pass under one hold of the lock (the main
        loop asks before every claim: three `count` calls walked them three times)."""
        counts = dict.fromkeys(AttemptState, 0)
        with self._lock:
            for h in self._held.values():
                counts[h.state] += 1
        return counts

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
