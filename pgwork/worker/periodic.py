"""The worker's schedules (`@app.periodic`): a thread that fires them, for workers run without the
operator. Any number of workers may run it for the same schedules: each tick is enqueued once by
the database's unique key (pgwork.db.schedules), so no worker leads and none waits for another."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import psycopg

from pgwork.db import Queue
from pgwork.errors import PgworkError
from pgwork.schedule import Schedule

log = logging.getLogger("pgwork.worker")

# Between firings: until the next tick is due, but at least this often (a schedule's first sight,
# a database back from an outage) and never busier than the shortest wait.
LONGEST_WAIT = 30.0
SHORTEST_WAIT = 0.5


def next_wait(next_ticks: Sequence[datetime | None], now: datetime) -> float:
    """Seconds until the earliest next tick, within [SHORTEST_WAIT, LONGEST_WAIT] (pure)."""
    waits = [(t - now).total_seconds() for t in next_ticks if t is not None]
    return min(LONGEST_WAIT, max(SHORTEST_WAIT, min(waits, default=LONGEST_WAIT)))


class Periodic:
    """Fires `schedules` on `queue` in a daemon thread until `stop()`."""

    def __init__(
        self, queue: Queue, schedules: Sequence[Schedule], *, clock: Callable[[], datetime] | None = None
    ) -> None:
        """`clock` None: fire at the database's clock (schedulers on several hosts agree); tests fix it."""
        self.queue = queue
        self.schedules = tuple(schedules)
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgwork-periodic", daemon=True)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def fire_once(self) -> list[datetime | None]:
        """Fire every schedule once; returns their next ticks (None where a firing failed)."""
        next_ticks: list[datetime | None] = []
        for schedule in self.schedules:
            try:
                fired = self.queue.fire_schedule(schedule, now=None if self.clock is None else self.clock())
            except (psycopg.Error, PgworkError) as exc:
                log.warning("schedule %s: %s", schedule.name, str(exc).splitlines()[0] if str(exc) else exc)
                next_ticks.append(None)
                continue
            for tick, job_id in fired.enqueued:
                log.info("schedule %s: tick %s enqueued as job %d", schedule.name, tick.isoformat(), job_id)
            if fired.skipped:
                log.warning("schedule %s: %d missed ticks skipped", schedule.name, fired.skipped)
            next_ticks.append(fired.next_tick)
        return next_ticks

    def _run(self) -> None:
        while not self._stop.is_set():
            next_ticks = self.fire_once()
            self._stop.wait(next_wait(next_ticks, datetime.now(UTC)))
