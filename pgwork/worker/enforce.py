"""What the worker does when an attempt passes its hard timeout (the watchdog finds it):
tell the handler to stop, then, if it does not return, fail the attempt without it and give its
runner slot to a new thread. Past `--max-abandoned` stuck threads the worker gives up."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from pgwork.db import Queue
from pgwork.durations import format_duration
from pgwork.worker.finishes import Finisher, Pending
from pgwork.worker.holdings import Held, HeldState
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import abandoned
from pgwork.worker.registry import StopReason
from pgwork.worker.runners import Runners
from pgwork.worker.timeouts import abandon_grace, effective_timeout, too_many_abandoned

log = logging.getLogger("pgwork.worker")


def arm(held: Held, handler_timeout: float | None) -> None:
    """As the handler starts (on its runner): its timeout, the job's own or its handler's, and
    the deadline the watchdog reads; the clock starts with the handler, not at the claim."""
    held.timeout = effective_timeout(held.claimed.timeout, handler_timeout)
    held.runner = threading.current_thread()
    if held.timeout is not None:
        held.deadline = time.monotonic() + held.timeout


class Enforcer:
    def __init__(
        self,
        queue: Queue,
        runners: Runners,
        finisher: Finisher,
        metrics: WorkerMetrics,
        *,
        max_abandoned: int,
        give_up: Callable[[str], None],
    ) -> None:
        self._queue = queue
        self._runners = runners
        self._finisher = finisher
        self._metrics = metrics
        self._max_abandoned = max_abandoned
        self._give_up = give_up
        metrics.abandoned_threads.set_function(lambda: runners.abandoned)

    def tell(self, held: Held) -> None:
        """The deadline passed: the cooperative stop every handler sees (should_stop, sleep)."""
        timeout = held.timeout or 0.0
        log.warning(
            "job %s (%s): timed out after %s; telling the handler to stop (abandoned in %gs if it does not)",
            held.claimed.id,
            held.claimed.job_type,
            format_duration(timeout),
            abandon_grace(timeout),
        )
        self._metrics.timed_out.labels(held.claimed.job_type).inc()
        held.job.request_stop(StopReason.TIMED_OUT)

    def abandon(self, held: Held) -> None:
        """The handler did not return: write the attempt's outcome without it (fenced, as any
        failure), free its slot, and never renew its lease again (once written it is not held)."""
        with held.lock:
            if held.state is not HeldState.RUNNING:
                return  # it returned (or was released) meanwhile: the runner decides
            held.state = HeldState.FINISHING
            held.abandoned = True
        job = held.job
        decision = abandoned(
            job.stop_reason,
            held.timeout or 0.0,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            backoff=self._queue.backoff_for(held.claimed.job_type).delay(job.attempt),
            now=datetime.now(UTC),
        )
        if held.runner is not None:
            self._runners.abandon(held.runner)
        self._metrics.abandoned.labels(held.claimed.job_type).inc()
        stuck = self._runners.abandoned
        log.error(
            "job %s (%s): the handler did not return after being told to stop; its thread is abandoned "
            "(%d abandoned, --max-abandoned %d) and a new runner takes its place",
            held.claimed.id,
            held.claimed.job_type,
            stuck,
            self._max_abandoned,
        )
        self._finisher.submit(Pending(held, decision, held.span))
        self._finisher.poke()
        if too_many_abandoned(stuck, self._max_abandoned):
            self._give_up(
                f"{stuck} handler threads are stuck past their timeouts (--max-abandoned {self._max_abandoned})"
            )
