"""The worker's event loop: one thread running asyncio, where `async def` handlers run as tasks.

The loop only runs handlers. Claims, heartbeats and finishes stay on their own threads and
connections, so a handler that blocks the loop (time.sleep, a synchronous HTTP or database call
inside an `async def`) delays the other async jobs and their cancellation, but never a lease
renewal. Such a block is noticed: a watcher task that should wake every LAG_TICK seconds logs a
warning when it wakes LAG_WARN or more late, naming the async jobs that were on the loop
meanwhile (one of them blocked it).

`cancel` is the one place where a running async job is cancelled (its task gets CancelledError at
the await it is waiting in); a job's stop request (cancellation, lease lost, shutdown, a timeout)
reaches it through `Job.when_stopped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from pgwork.worker.attempt import Attempt

log = logging.getLogger("pgwork.worker")

# How often the watcher task wakes; a wake-up LAG_WARN late means something blocked the loop.
LAG_TICK = 0.1
LAG_WARN = 0.5
# At most one blocked-loop warning per this many seconds (a handler blocking in a loop would
# otherwise log every tick).
LAG_WARN_EVERY = 10.0
# How long stopping waits for tasks still running (they were cancelled already) to end.
STOP_SECONDS = 1.0

JobCoroutine = Callable[[Attempt], Coroutine[Any, Any, None]]
BatchCoroutine = Callable[[list[Attempt]], Coroutine[Any, Any, None]]
Starter = Callable[[], Coroutine[Any, Any, None]]


class EventLoop(threading.Thread):
    def __init__(self, *, lag_warn: float = LAG_WARN) -> None:
        super().__init__(name="pgwork-event-loop", daemon=True)
        self._loop = asyncio.new_event_loop()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._types: dict[int, str] = {}  # of the jobs in _tasks, for the blocked-loop warning
        # The jobs on the loop at any time since the watcher last woke: one of them blocked it
        # if it wakes late (the one that did may have finished by then).
        self._window: dict[int, str] = {}
        self._lag_warn = lag_warn
        self._last_warning = float("-inf")
        self.longest_lag = 0.0  # seconds; the worst wake-up delay seen, for tests and logs

    # -- from other threads ---------------------------------------------------------------

    def submit(self, key: int, job_type: str, start: Starter, done: Callable[[], None]) -> None:
        """Run `start()` (one job's coroutine, or a batch's, keyed by its first job's id) as a
        task on the loop; `done()` is called on the loop thread when it ends."""
        self._loop.call_soon_threadsafe(self._spawn, key, job_type, start, done)

    def cancel(self, key: int) -> None:
        """Cancel the task of the job (or batch) `key`, if it is running: the one place an async
        job is cancelled. Safe from any thread and at any time (a task already done, or a loop
        already closed, is left alone)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(self._cancel, key)

    def discard(self) -> None:
        """Close the loop of a worker that never started it (its start failed): an unclosed loop
        is finalised at interpreter exit, after its self-pipe, and prints a traceback under the
        worker's one-line error."""
        if self.ident is None and not self._loop.is_closed():
            self._loop.close()

    def stop(self) -> None:
        """Cancel whatever still runs, give it STOP_SECONDS to end, then stop the loop."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._shutdown()))

    # -- on the loop thread ---------------------------------------------------------------

    def run(self) -> None:
        asyncio.set_event_loop(self._loop)
        watcher = self._loop.create_task(self._watch(), name="pgwork-loop-watch")
        try:
            self._loop.run_forever()
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                self._loop.run_until_complete(asyncio.gather(watcher, return_exceptions=True))
            # A task that ignored its cancellation keeps the loop open (the thread is a daemon
            # and its job was released already); otherwise the loop is closed cleanly.
            if all(t.done() for t in self._tasks.values()):
                self._loop.close()

    def _spawn(self, job_id: int, job_type: str, start: Starter, done: Callable[[], None]) -> None:
        task = self._loop.create_task(start(), name=f"pgwork-job-{job_id}")
        self._tasks[job_id] = task
        self._types[job_id] = self._window[job_id] = job_type

        def ended(_: asyncio.Task[None]) -> None:
            self._tasks.pop(job_id, None)
            self._types.pop(job_id, None)
            done()

        task.add_done_callback(ended)

    def _cancel(self, job_id: int) -> None:
        task = self._tasks.get(job_id)
        if task is not None and not task.done():
            task.cancel()

    async def _shutdown(self) -> None:
        running = [t for t in self._tasks.values() if not t.done()]
        for task in running:
            task.cancel()
        if running:
            _, pending = await asyncio.wait(running, timeout=STOP_SECONDS)
            if pending:
                log.warning(
                    "%d async job(s) ignored cancellation on shutdown (their jobs were released already)", len(pending)
                )
        self._loop.stop()

    async def _watch(self) -> None:
        while True:
            before = time.monotonic()
            self._window = dict(self._types)
            await asyncio.sleep(LAG_TICK)
            lag = time.monotonic() - before - LAG_TICK
            self.longest_lag = max(self.longest_lag, lag)
            if lag >= self._lag_warn and time.monotonic() - self._last_warning >= LAG_WARN_EVERY:
                self._last_warning = time.monotonic()
                log.warning(
                    "event loop blocked for %.1fs: an async handler ran blocking code without awaiting "
                    "(time.sleep, a synchronous HTTP or database call); every async job here waited. "
                    "Async jobs on the loop meanwhile: %s. Use await (asyncio.sleep, an async client) or "
                    "asyncio.to_thread for blocking calls; PYTHONASYNCIODEBUG=1 makes asyncio name the slow task",
                    lag,
                    self._in_flight(),
                )

    def _in_flight(self) -> str:
        return ", ".join(f"job {i} ({t})" for i, t in sorted(self._window.items())) or "none"
