"""`--concurrency` slots, shared by the two kinds of handler.

A plain handler's job goes to a fixed pool of runner threads (started once, fed by a queue, no
thread per job); an `async def` handler's job becomes a task on the worker's event loop
(pgwork.worker.eventloop). Jobs start in the order they were submitted (the claim's priority
order) and never more than `count` at once, whatever the mix: a worker serving both kinds runs
at most `--concurrency` jobs, not that many of each. The threads exist only if some job type
has a plain handler, the loop only if one has an async handler.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable

from pgwork.worker.eventloop import EventLoop, JobCoroutine
from pgwork.worker.holdings import Held

log = logging.getLogger("pgwork.worker")


class Runners:
    def __init__(
        self,
        count: int,
        run: Callable[[Held], None],
        *,
        run_async: JobCoroutine | None = None,
        is_async: Callable[[Held], bool] = lambda held: False,
        threads: bool = True,
    ) -> None:
        """`run` runs a plain handler's job on a runner thread; `run_async` (given when some type
        has an async handler) is awaited on the event loop for the jobs `is_async` picks.
        `threads` False: no job has a plain handler, so no runner thread is started."""
        self._count = count
        self._run = run
        self._run_async = run_async
        self._is_async = is_async
        self._jobs: queue.SimpleQueue[Held | None] = queue.SimpleQueue()
        self._waiting: collections.deque[Held] = collections.deque()
        self._lock = threading.Lock()
        self.busy = 0  # jobs started (on a thread or the loop) and not yet ended
        self._threads = [
            threading.Thread(target=self._serve, name=f"pgwork-runner-{i}", daemon=True)
            for i in range(count if threads else 0)
        ]
        self.loop = EventLoop() if run_async is not None else None

    def kinds(self) -> str:
        """How jobs run here, for the worker's first log line."""
        where = [w for w, used in (("threads", self._threads), ("an event loop", self.loop)) if used]
        return " on " + " and ".join(where)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        if self.loop is not None:
            self.loop.start()

    def submit(self, held: Held) -> None:
        with self._lock:
            self._waiting.append(held)
        self._dispatch()

    def cancel(self, held: Held) -> None:
        """Cancel a running async job's task (see EventLoop.cancel); a plain handler's job is
        only told to stop (Job.request_stop), as a thread cannot be cancelled."""
        if self.loop is not None and self._is_async(held):
            self.loop.cancel(held)

    def stop(self) -> None:
        """Each runner thread ends after the job it is on (jobs still queued were released
        already); the loop cancels what still runs on it and stops."""
        for _ in self._threads:
            self._jobs.put(None)
        if self.loop is not None:
            self.loop.stop()

    def join(self, seconds: float) -> None:
        """Wait up to `seconds` for the event loop to stop (runner threads are daemons: one
        stuck in a handler that ignores its stop request must not hold the process)."""
        if self.loop is not None and self.loop.is_alive():
            self.loop.join(seconds)

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self.busy >= self._count or not self._waiting:
                    return
                held = self._waiting.popleft()
                self.busy += 1
            if self.loop is not None and self._run_async is not None and self._is_async(held):
                self.loop.submit(held, self._run_async, self._ended)
            else:
                self._jobs.put(held)

    def _ended(self) -> None:
        with self._lock:
            self.busy -= 1
        self._dispatch()

    def _serve(self) -> None:
        while True:
            held = self._jobs.get()
            if held is None:
                return
            try:
                self._run(held)
            except BaseException:  # a runner must outlive any job; _run records its own errors
                log.exception("job %s: runner failed", held.claimed.id)
            finally:
                self._ended()
