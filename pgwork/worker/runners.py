"""A fixed pool of runner threads fed by a queue: `--concurrency` threads started once, each
taking the next held job, running it, and going back for another. No thread per job.

A thread stuck in a handler past its timeout cannot be killed. `abandon` stops counting it and
starts a runner in its place, so `--concurrency` jobs can still run; if the stuck thread ever
returns, it ends instead of taking another job."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from pgwork.worker.holdings import Held

log = logging.getLogger("pgwork.worker")


class Runners:
    def __init__(self, count: int, run: Callable[[Held], None]) -> None:
        self._jobs: queue.SimpleQueue[Held | None] = queue.SimpleQueue()
        self._run = run
        self._lock = threading.Lock()
        self.busy = 0  # runners inside a job right now (abandoned threads not counted)
        self._made = 0
        self._started = False
        self._threads = [self._new() for _ in range(count)]
        self._abandoned: set[threading.Thread] = set()

    def _new(self) -> threading.Thread:
        thread = threading.Thread(target=self._serve, name=f"pgwork-runner-{self._made}", daemon=True)
        self._made += 1
        return thread

    def start(self) -> None:
        with self._lock:
            self._started = True
            threads = list(self._threads)
        for thread in threads:
            thread.start()

    def submit(self, held: Held) -> None:
        self._jobs.put(held)

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
        return True

    def stop(self) -> None:
        """Each runner ends after the job it is on (jobs still queued were released already)."""
        with self._lock:
            count = len(self._threads)
        for _ in range(count):
            self._jobs.put(None)

    def join(self, until: float, clock: Callable[[], float]) -> None:
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, until - clock()))

    def _serve(self) -> None:
        me = threading.current_thread()
        while True:
            held = self._jobs.get()
            if held is None:
                return
            with self._lock:
                self.busy += 1
            try:
                self._run(held)
            except BaseException:  # a runner must outlive any job; _run records its own errors
                log.exception("job %s: runner failed", held.claimed.id)
            with self._lock:
                if me in self._abandoned:
                    # Its slot went to a replacement: end here, or the pool would run one too many.
                    self._abandoned.discard(me)
                    return
                self.busy -= 1
