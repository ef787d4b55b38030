"""The watchdog thread: enforces each running attempt's hard timeout (pgwork.worker.timeouts).

It only watches: at an attempt's deadline it calls `tell` (the worker tells the handler to
stop), and once the grace after that has passed too, `abandon` (the worker fails the attempt
without its thread and replaces the thread). It sleeps until the next deadline it knows of, and
at most POLL seconds, so an attempt that starts meanwhile is seen soon enough.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pgwork.worker.holdings import Held, HeldState, Holdings
from pgwork.worker.timeouts import Step, next_step, wake_at

log = logging.getLogger("pgwork.worker")

POLL = 0.25
Act = Callable[[Held], None]


class Watchdog(threading.Thread):
    def __init__(
        self, holdings: Holdings, tell: Act, abandon: Act, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(name="pgwork-watchdog", daemon=True)
        self._holdings = holdings
        self._tell = tell
        self._abandon = abandon
        self._clock = clock
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            now = self._clock()
            try:
                wake = self.check(now)
            except Exception:  # the timeouts depend on this thread: log and go on
                log.exception("watchdog round failed unexpectedly")
                wake = now + POLL
            self._stop_event.wait(min(POLL, max(0.01, wake - self._clock())))

    def check(self, now: float) -> float:
        """Act on every attempt whose deadline (or grace) has passed; return when to look next."""
        wake = now + POLL
        for held in self._holdings.snapshot():
            if held.state is not HeldState.RUNNING or held.deadline is None or held.timeout is None:
                continue
            step = next_step(now, held.deadline, held.timeout, told=held.told)
            if step is Step.TELL:
                held.told = True
                self._tell(held)
            elif step is Step.ABANDON:
                self._abandon(held)
                continue
            wake = min(wake, wake_at(held.deadline, held.timeout, told=held.told))
        return wake
