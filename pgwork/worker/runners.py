"""A fixed pool of runner threads fed by a queue: `--concurrency` threads started once, each
taking the next held job, running it, and going back for another. No thread per job."""

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
        self.busy = 0  # runners inside a job right now
        self._threads = [
            threading.Thread(target=self._serve, name=f"pgwork-runner-{i}", daemon=True) for i in range(count)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, held: Held) -> None:
        self._jobs.put(held)

    def stop(self) -> None:
        """Each runner ends after the job it is on (jobs still queued were released already)."""
        for _ in self._threads:
            self._jobs.put(None)

    def join(self, until: float, clock: Callable[[], float]) -> None:
        for thread in self._threads:
            thread.join(max(0.0, until - clock()))

    def _serve(self) -> None:
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
            finally:
                with self._lock:
                    self.busy -= 1
