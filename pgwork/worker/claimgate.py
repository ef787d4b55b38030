"""Who claims next: the main loop, or the finisher in the same round trip as its write.

A one-job worker that finishes a job has exactly one free slot, and the claim that fills it can
ride on the finish (pgwork.db.roundtrip). The gate makes the two claimers take turns, so the
worker never holds more than its capacity: whoever claims holds the gate from reading the room
to holding the jobs claimed. Once a stop is requested the gate closes for good and no claim
starts; the drain waits for one under way, so every job it brought is held before the drain
releases what has not started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from pgwork.models import ClaimedJob


@dataclass(frozen=True)
class ClaimRoom:
    """What a claim needs: who claims which types for how long, the room to claim into now
    (pgwork.worker.slots.claim_size; 0 once stopping), and how to hold what came back (with the
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
