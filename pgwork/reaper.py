"""The reaper: running jobs whose lease lapsed go back to pending (River's rescuer, one service).

One shape for every caller: `pgwork reap` (the reaper CronJob, optionally looping inside one run
for finer than a minute), and the tools' in-process reapers (`pgwork demo`, `pgwork chaos`).
`ReaperConfig` holds the defaults and checks them; `run_once()` is one round; `loop()` repeats it
until told to stop or until the next round would start past the run's end. The decision whether
another round fits is a pure function of the clock, so it is tested without sleeping.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType

import psycopg

from pgwork.db import Queue
from pgwork.durations import check_seconds
from pgwork.errors import InvalidArgument, PgworkError
from pgwork.models import Reclaimed

DEFAULT_EVERY = 10.0
DEFAULT_LIMIT = 1000
# What one round archives at most when archive_after is set: 10 transactions of 10,000 jobs.
ARCHIVE_BATCH = 10_000
ARCHIVE_BATCHES = 10


@dataclass(frozen=True)
class ReaperConfig:
    every: float = DEFAULT_EVERY  # seconds between rounds when looping
    limit: int = DEFAULT_LIMIT  # leases returned per round at most
    loop_for: float | None = 0.0  # keep looping this long (0: one round; None: until stopped)
    # Archive succeeded/cancelled jobs older than this each round (None: never, the default).
    archive_after: float | None = None

    def __post_init__(self) -> None:
        # Bounded first (a century at most), so the comparisons and sums below never overflow.
        check_seconds(self.every, "every", fix="give the pause in seconds, e.g. 10.0")
        if self.loop_for is not None:
            check_seconds(self.loop_for, "loop_for", fix="use seconds >= 0, or None")
        if not self.every > 0:
            raise InvalidArgument("every", f"{self.every!r} is not > 0", "give the pause in seconds, e.g. 10.0")
        if not 1 <= self.limit <= 1_000_000:
            raise InvalidArgument("limit", f"{self.limit!r} is out of range", "use 1..1000000")
        if self.loop_for is not None and not self.loop_for >= 0:
            raise InvalidArgument("loop_for", f"{self.loop_for!r} is negative", "use seconds >= 0, or None")
        if self.archive_after is not None:
            check_seconds(self.archive_after, "archive_after", fix="give an age in seconds >= 0, or None")
            if not self.archive_after >= 0:
                raise InvalidArgument("archive_after", f"{self.archive_after!r} is negative", "use seconds >= 0")


def another_round_fits(now: float, every: float, deadline: float | None) -> bool:
    """Whether a round started `every` seconds from `now` would still start by `deadline` (None: no end)."""
    return deadline is None or now + every <= deadline


class Reaper:
    """Opens its queue on first use (`connect()`); closes it on `close()` or after a failed round.

    With `on_error` set, a round that fails on the database is counted, handed to `on_error`, and
    the next round reconnects: a reaper that outlives database restarts, as the CronJob does by
    being restarted. Without it, the error propagates (`pgwork reap` exits 2 on it).
    """

    def __init__(
        self,
        connect: Callable[[], Queue],
        config: ReaperConfig | None = None,
        *,
        on_reclaimed: Callable[[Reclaimed], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.config = config or ReaperConfig()
        self._connect = connect
        self._on_reclaimed = on_reclaimed
        self._on_error = on_error
        self._queue: Queue | None = None
        # A round and close() never overlap: the tools stop a looping reaper from another thread
        # (join with a timeout, then close), and closing the pool under a round still running on
        # a loaded machine used its one connection from two threads ("another command is already
        # in progress"). close() waits for the round; a loop closed under it stops.
        self._lock = threading.RLock()
        self._closed = False
        self.rounds = 0
        self.reclaimed = 0
        self.archived = 0
        self.errors = 0

    def run_once(self, now: datetime | None = None) -> list[Reclaimed]:
        """One round: return every lapsed lease (up to `limit`) to pending, rotate the ready ring, and
        with `archive_after` set move up to 100,000 finished jobs that old into pgwork.job_history."""
        with self._lock:
            if self._queue is None:
                self._queue = self._connect()
            found = self._queue.reap(now=now, limit=self.config.limit)
            # The ready ring's drained segments, truncated (migration 23); workers do it too.
            self._queue.rotate_ready(now=now)
            if self.config.archive_after is not None:
                # Finished history out of pgwork.jobs (migration 27), a bounded share a round.
                self.archived += self._queue.archive(
                    timedelta(seconds=self.config.archive_after),
                    batch=ARCHIVE_BATCH,
                    max_batches=ARCHIVE_BATCHES,
                    now=now,
                )
            self.rounds += 1
            self.reclaimed += len(found)
            if self._on_reclaimed is not None:
                for r in found:
                    self._on_reclaimed(r)
            return found

    def loop(self, stop: threading.Event | None = None) -> None:
        """Rounds every `every` seconds until `stop` is set or the next would start past `loop_for`."""
        stop = stop or threading.Event()
        loop_for = self.config.loop_for
        deadline = None if loop_for is None else time.monotonic() + loop_for
        while not stop.is_set():
            if not self._round():
                return
            if not another_round_fits(time.monotonic(), self.config.every, deadline):
                return
            if stop.wait(self.config.every):
                return

    def _round(self) -> bool:
        """One round of the loop; False once close() was called (no round reopens the queue)."""
        with self._lock:
            if self._closed:
                return False
            try:
                self.run_once()
            except (psycopg.Error, PgworkError) as exc:
                if self._on_error is None:
                    raise
                self.errors += 1
                self._drop_queue()
                self._on_error(exc)
            return True

    def _drop_queue(self) -> None:
        if self._queue is not None:
            with contextlib.suppress(Exception):
                self._queue.close()
            self._queue = None

    def close(self) -> None:
        """Close the queue, after the round in flight (if any) ends; a loop stops at its next round."""
        with self._lock:
            self._closed = True
            if self._queue is not None:
                queue, self._queue = self._queue, None
                queue.close()

    def __enter__(self) -> Reaper:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
