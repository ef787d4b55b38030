"""`--concurrency` slots, shared by the two kinds of handler.

A plain handler's job goes to a fixed pool of runner threads (started once, fed by a queue, no
thread per job); an `async def` handler's job becomes a task on the worker's event loop
(pgwork.worker.eventloop). Jobs start in the order they were submitted (the claim's priority
order) and never more than `count` at once, whatever the mix: a worker serving both kinds runs
at most `--concurrency` jobs, not that many of each. The threads exist only if some job type
has a plain handler, the loop only if one has an async handler.

A thread stuck in a handler past its timeout cannot be killed. `abandon` stops counting it and
starts a runner in its place, so `--concurrency` jobs can still run; if the stuck thread ever
returns, it ends instead of taking another job. (An async job past its timeout is cancelled.)
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
        idle: Callable[[], None] = lambda: None,
    ) -> None:
        """`run` runs a plain handler's job on a runner thread; `run_async` (given when some type
        has an async handler) is awaited on the event loop for the jobs `is_async` picks.
        `threads` False: no job has a plain handler, so no runner thread is started. `idle` is
        called when the last busy slot frees (the finisher then writes instead of lingering)."""
        self._count = count
        self._run = run
        self._run_async = run_async
        self._is_async = is_async
        self._idle = idle
        self._jobs: queue.SimpleQueue[Held | None] = queue.SimpleQueue()
        self._waiting: collections.deque[Held] = collections.deque()
        self._lock = threading.Lock()
        self.busy = 0  # jobs started (on a thread or the loop) and not yet ended, abandoned ones not counted
        self._made = 0
        self._started = False
        self._threads = [self._new() for _ in range(count if threads else 0)]
        self._abandoned: set[threading.Thread] = set()
        self.loop = EventLoop() if run_async is not None else None

    def _new(self) -> threading.Thread:
        thread = threading.Thread(target=self._serve, name=f"pgwork-runner-{self._made}", daemon=True)
        self._made += 1
        return thread

    def kinds(self) -> str:
        """How jobs run here, for the worker's first log line."""
        where = [w for w, used in (("threads", self._threads), ("an event loop", self.loop)) if used]
        return " on " + " and ".join(where)

    def start(self) -> None:
        with self._lock:
            self._started = True
            threads = list(self._threads)
        for thread in threads:
            thread.start()
        if self.loop is not None:
            self.loop.start()

    def submit(self, held: Held) -> None:
        self.submit_many([held])

    def submit_many(self, batch: list[Held]) -> None:
        """A claim's jobs, in its order: one lock and one dispatch for the batch, not per job."""
        with self._lock:
            self._waiting.extend(batch)
        self._dispatch()

    @property
    def abandoned(self) -> int:
        """Threads given up on that are still inside their handler."""
        with self._lock:
            return len(self._abandoned)

    def abandon(self, thread: threading.Thread) -> bool:
        """Stop counting `thread` (stuck in a handler) as a runner and start one in its place.
        False if it is not one of the pool's runners (already abandoned)."""
        with self._lock:
            if thread not in self._threads:
                return False
            self._threads.remove(thread)
            self._abandoned.add(thread)
            self.busy -= 1
            replacement = self._new()
            self._threads.append(replacement)
            start = self._started
        if start:
            replacement.start()
        self._dispatch()  # its slot is free again
        return True

    def cancel(self, held: Held) -> None:
        """Cancel a running async job's task (see EventLoop.cancel); a plain handler's job is
        only told to stop (Job.request_stop), as a thread cannot be cancelled."""
        if self.loop is not None and self._is_async(held):
            self.loop.cancel(held)

    def stop(self) -> None:
        """Each runner thread ends after the job it is on (jobs still queued were released
        already); the loop cancels what still runs on it and stops."""
        with self._lock:
            count = len(self._threads)
        for _ in range(count):
            self._jobs.put(None)
        if self.loop is not None:
            self.loop.stop()

    def join(self, until: float, clock: Callable[[], float]) -> None:
        """Wait until `until` (on `clock`) for the runner threads and the event loop to end; an
        abandoned thread is not waited for (they are daemons: one stuck in a handler must not
        hold the process)."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, until - clock()))
        if self.loop is not None and self.loop.is_alive():
            self.loop.join(max(0.0, until - clock()))

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self.busy >= self._count or not self._waiting:
                    return
                held = self._waiting.popleft()
                self.busy += 1
            if self._on_loop(held):
                assert self.loop is not None and self._run_async is not None
                self.loop.submit(held, self._run_async, self._task_ended)
            else:
                self._jobs.put(held)

    @property
    def queued(self) -> int:
        """Jobs submitted and not yet handed to a slot (read without the lock: a hint)."""
        return len(self._waiting)

    def _ended(self, *, runner: bool = False) -> Held | None:
        """A slot is free. On a runner thread (`runner`), the next queued job, if a plain
        handler's, is returned for that same thread to run: a job handed from one thread to the
        next costs a wake-up and a switch of the interpreter lock each, more than a trivial job."""
        mine = None
        with self._lock:
            self.busy -= 1
            if runner and self._waiting and self.busy < self._count and not self._on_loop(self._waiting[0]):
                mine = self._waiting.popleft()
                self.busy += 1
        if mine is None:
            self._dispatch()
            if self.busy == 0:
                self._idle()
        return mine

    def _task_ended(self) -> None:
        self._ended()

    def _on_loop(self, held: Held) -> bool:
        return self.loop is not None and self._run_async is not None and self._is_async(held)

    def _serve(self) -> None:
        me = threading.current_thread()
        held: Held | None = None
        while True:
            if held is None:
                held = self._jobs.get()
                if held is None:
                    return
            try:
                self._run(held)
            except BaseException:  # a runner must outlive any job; _run records its own errors
                log.exception("job %s: runner failed", held.claimed.id)
            with self._lock:
                replaced = me in self._abandoned
                self._abandoned.discard(me)
            if replaced:
                return  # its slot went to a replacement: end here, or the pool would run one too many
            held = self._ended(runner=True)
