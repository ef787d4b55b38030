"""`--concurrency` slots, shared by the two kinds of handler.

A plain handler's job goes to a fixed pool of runner threads (started once, fed by a queue, no
thread per job); an `async def` handler's job becomes a task on the worker's event loop
(pgwork.worker.eventloop). Jobs start in the order they were submitted (the claim's priority
order) and never more than `count` at once, whatever the mix: a worker serving both kinds runs
at most `--concurrency` jobs, not that many of each. The threads exist only if some job type
has a plain handler, the loop only if one has an async handler.

A batch handler's jobs (pgwork.handler's `batch=N`) take one slot per call: the jobs of its type
waiting here are handed over together, up to N, once N are here or the first of them has waited
its `batch_wait` since its claim (a timer dispatches then), whichever comes first.

A thread stuck in a handler past its timeout cannot be killed. `abandon` stops counting it and
starts a runner in its place, so `--concurrency` jobs can still run; if the stuck thread ever
returns, it ends instead of taking another job. (An async job past its timeout is cancelled.)
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from pgwork.worker.attempt import Attempt
from pgwork.worker.eventloop import BatchCoroutine, EventLoop, JobCoroutine

log = logging.getLogger("pgwork.worker")


# Runs one attempt on a runner thread. True: it wrote its own outcome and claimed into its slot
# (Finisher.submit's shortcut), so the main loop need not be woken.
Run = Callable[[Attempt], bool | None]
RunBatch = Callable[[list[Attempt]], bool | None]
Unit = Attempt | list[Attempt]  # what one slot runs: a job, or a batch handler's jobs


def batch_size(attempt: Attempt) -> int | None:
    """How many jobs of its type a call of its handler takes; None: one Job, not a list."""
    spec = attempt.spec
    return None if spec is None else spec.batch


class Runners:
    def __init__(
        self,
        count: int,
        *,
        threads: bool = True,
        loop: bool = False,
        freed: threading.Event | None = None,
        queued: int | None = None,
    ) -> None:
        """`count` slots. `threads` False: no job has a plain handler, so no runner thread is
        started; `loop`: some job has an async handler, so the event loop runs. `freed` is set
        when a job ends and the main loop may find room to claim into (fewer than `queued` jobs
        queued here: the most the worker claims to hold, default `count`). What runs is given
        to `start`."""
        self._count = count
        self._queued_max = count if queued is None else queued
        self._run: Run = lambda attempt: None
        self._run_async: JobCoroutine | None = None
        self._run_batch: RunBatch = lambda attempts: None
        self._run_async_batch: BatchCoroutine | None = None
        self._idle: Callable[[], None] = lambda: None
        self._freed = freed
        self._timer: threading.Timer | None = None
        self._timer_at = float("inf")
        self._jobs: queue.SimpleQueue[Unit | None] = queue.SimpleQueue()
        self._waiting: collections.deque[Attempt] = collections.deque()
        self._lock = threading.Lock()
        self.busy = 0  # jobs started (on a thread or the loop) and not yet ended, abandoned ones not counted
        self._made = 0
        self._started = False
        self._threads = [self._new() for _ in range(count if threads else 0)]
        self._abandoned: set[threading.Thread] = set()
        self.loop = EventLoop() if loop else None

    def _new(self) -> threading.Thread:
        thread = threading.Thread(target=self._serve, name=f"pgwork-runner-{self._made}", daemon=True)
        self._made += 1
        return thread

    def kinds(self) -> str:
        """How jobs run here, for the worker's first log line."""
        where = [w for w, used in (("threads", self._threads), ("an event loop", self.loop)) if used]
        return " on " + " and ".join(where)

    @property
    def threads(self) -> int:
        """Runner threads in the pool (abandoned ones not counted)."""
        with self._lock:
            return len(self._threads)

    def is_busy(self) -> bool:
        return self.busy > 0

    def start(
        self,
        run: Run,
        run_async: JobCoroutine | None = None,
        *,
        run_batch: RunBatch | None = None,
        run_async_batch: BatchCoroutine | None = None,
        idle: Callable[[], None] = lambda: None,
    ) -> None:
        """Start serving: `run` runs a plain handler's attempt on a runner thread, `run_async` an
        async one's on the event loop, `run_batch`/`run_async_batch` a batch handler's jobs;
        `idle` is called when the last busy slot frees (the finisher then writes instead of
        lingering)."""
        with self._lock:
            self._run, self._run_async, self._idle = run, run_async, idle
            self._run_batch = run_batch or self._run_batch
            self._run_async_batch = run_async_batch
            self._started = True
            threads = list(self._threads)
        for thread in threads:
            thread.start()
        if self.loop is not None:
            self.loop.start()

    def submit(self, attempt: Attempt) -> None:
        self.submit_many([attempt])

    def submit_many(self, batch: list[Attempt]) -> None:
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

    def cancel(self, attempt: Attempt) -> None:
        """Cancel a running async job's task (see EventLoop.cancel); a plain handler's job is
        only told to stop (Job.request_stop), as a thread cannot be cancelled."""
        if self.loop is not None and attempt.on_loop:
            self.loop.cancel(attempt.id)

    def discard(self) -> None:
        """A worker whose start failed: close what was made for it and never started."""
        if self.loop is not None:
            self.loop.discard()

    def stop(self) -> None:
        """Each runner thread ends after the job it is on (jobs still queued were released
        already); the loop cancels what still runs on it and stops."""
        with self._lock:
            count = len(self._threads)
            if self._timer is not None:
                self._timer.cancel()
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
        # Every unit that may start now is taken under one hold of the lock (a claim's 100 jobs
        # took it 100 times, against runners ending jobs), then handed out.
        units: list[Unit] = []
        with self._lock:
            while self.busy < self._count and self._waiting:
                unit = self._next()
                if unit is None:
                    break  # only batches still filling: the timer dispatches them
                self.busy += 1
                units.append(unit)
        for unit in units:
            first = unit[0] if isinstance(unit, list) else unit
            if self._on_loop(first):
                assert self.loop is not None
                self.loop.submit(first.id, first.job_type, self._starter(unit), self._task_ended)
            else:
                self._jobs.put(unit)

    def _next(self) -> Unit | None:
        """Under the lock: the next unit to start, in the claim's order; a batch type's jobs
        once its batch is full or its first job has waited its batch_wait, else None (and the
        timer set for the earliest batch to come due)."""
        now = time.monotonic()
        due = float("inf")
        passed: set[str] = set()
        for index, attempt in enumerate(self._waiting):
            size = batch_size(attempt)
            if size is None:
                del self._waiting[index]
                return attempt
            if attempt.job_type in passed:
                continue
            mates = [a for a in self._waiting if a.job_type == attempt.job_type][:size]
            assert attempt.spec is not None
            ready_at = attempt.claimed_at + attempt.spec.batch_wait
            if len(mates) >= size or now >= ready_at:
                for a in mates:
                    self._waiting.remove(a)
                return mates
            passed.add(attempt.job_type)
            due = min(due, ready_at)
        if due < self._timer_at:
            self._timer_at = due
            timer = threading.Timer(max(0.0, due - now), self._on_timer)
            timer.daemon = True
            if self._timer is not None:
                self._timer.cancel()
            self._timer = timer
            timer.start()
        return None

    def _on_timer(self) -> None:
        with self._lock:
            self._timer_at = float("inf")
        self._dispatch()

    def _starter(self, unit: Unit) -> Callable[[], Coroutine[Any, Any, None]]:
        if isinstance(unit, list):
            run_batch = self._run_async_batch
            assert run_batch is not None
            return lambda: run_batch(unit)
        run = self._run_async
        assert run is not None
        return lambda: run(unit)

    def wake_below(self, queued: int) -> None:
        """From now on, wake the main loop when a job ends with fewer than `queued` jobs queued
        (claims.wake_below: it changes with whether the worker claims a batch ahead)."""
        self._queued_max = queued

    @property
    def queued(self) -> int:
        """Jobs submitted and not yet handed to a slot (read without the lock: a hint)."""
        return len(self._waiting)

    def _ended(self, *, runner: bool = False, inline: bool = False) -> Attempt | None:
        """A slot is free. On a runner thread (`runner`), the next queued job, if a plain
        handler's, is returned for that same thread to run: a job handed from one thread to the
        next costs a wake-up and a switch of the interpreter lock each, more than a trivial job.
        `inline`: the attempt's own write claimed into the slot and woke the main loop already."""
        if not inline:
            self._wake_main()
        mine = None
        with self._lock:
            self.busy -= 1
            head = self._waiting[0] if runner and self._waiting else None
            if head is not None and self.busy < self._count and not self._on_loop(head) and batch_size(head) is None:
                mine = self._waiting.popleft()
                self.busy += 1
        if mine is None:
            self._dispatch()
            if self.busy == 0:
                self._idle()
        return mine

    def _wake_main(self) -> None:
        """Wake the main loop only if it may find room: while --concurrency jobs are still
        queued here (each held WAITING), claim_size says 0 anyway, and waking it per job to
        learn that costs a thread switch each."""
        freed = self._freed
        if freed is not None and len(self._waiting) < self._queued_max and not freed.is_set():
            freed.set()

    def _task_ended(self) -> None:
        self._ended()

    def _on_loop(self, attempt: Attempt) -> bool:
        return self.loop is not None and attempt.on_loop

    def _serve(self) -> None:
        me = threading.current_thread()
        unit: Unit | None = None
        while True:
            if unit is None:
                unit = self._jobs.get()
                if unit is None:
                    return
            inline = False
            try:
                inline = bool(self._run_batch(unit) if isinstance(unit, list) else self._run(unit))
            except BaseException:  # a runner must outlive any job; _run records its own errors
                first = unit[0] if isinstance(unit, list) else unit
                log.exception("job %s: runner failed", first.id)
            with self._lock:
                replaced = me in self._abandoned
                self._abandoned.discard(me)
            if replaced:
                return  # its slot went to a replacement: end here, or the pool would run one too many
            unit = self._ended(runner=True, inline=inline)
