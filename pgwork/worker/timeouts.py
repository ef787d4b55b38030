"""Hard timeouts: which applies, when a stuck handler is given up, and what the worker does then.

A timeout is enforced in two steps. At the deadline the handler is told to stop (the cooperative
cancellation every handler already sees through `job.should_stop` and `job.sleep`); one that
returns within a short grace fails the attempt as timed out. One that does not is abandoned: a
Python thread cannot be killed, so the attempt is failed without it, its runner slot goes to a
new thread, and whatever the old thread returns later is ignored (its lease token no longer
holds the job). Abandoned threads still use memory and CPU (or a GPU), so a worker that has
more than `--max-abandoned` of them stops claiming, drains, and exits non-zero for a restart.

The decisions are pure functions (tested as tables); the `Watchdog` thread only watches (at an
attempt's deadline it calls `tell`, once the grace has passed too `abandon`); the `Enforcer`
does what those two mean for the worker.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from pgwork.durations import format_duration
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.finishes import Finisher
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import StopReason
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.options import DEFAULT_MAX_ABANDONED, EXIT_ABANDONED
from pgwork.worker.outcome import abandoned
from pgwork.worker.runners import Runners

log = logging.getLogger("pgwork.worker")

__all__ = ["DEFAULT_MAX_ABANDONED", "EXIT_ABANDONED", "Enforcer", "Step", "Watchdog", "arm"]


# How long a told-to-stop handler may take to return before it is abandoned: a tenth of the
# timeout, at least half a second (a handler checking should_stop between steps needs a moment),
# at most five seconds (the job is already late).
MIN_ABANDON_GRACE = 0.5
MAX_ABANDON_GRACE = 5.0


class Step(enum.Enum):
    WAIT = "wait"  # before the deadline, or the handler was already told and has grace left
    TELL = "tell"  # the deadline passed: tell the handler to stop
    ABANDON = "abandon"  # told, and the grace passed too: fail the attempt without the thread


def effective_timeout(job_timeout: float | None, handler_timeout: float | None) -> float | None:
    """The job's own timeout (set at enqueue) wins over its handler's; None: no timeout."""
    return job_timeout if job_timeout is not None else handler_timeout


def abandon_grace(timeout: float) -> float:
    return min(MAX_ABANDON_GRACE, max(MIN_ABANDON_GRACE, timeout / 10))


def next_step(now: float, deadline: float, timeout: float, *, told: bool) -> Step:
    """What the watchdog does now for a running attempt whose deadline is `deadline` (monotonic)."""
    if now < deadline:
        return Step.WAIT
    if not told:
        return Step.TELL
    return Step.ABANDON if now >= deadline + abandon_grace(timeout) else Step.WAIT


def wake_at(deadline: float, timeout: float, *, told: bool) -> float:
    """When the attempt next needs the watchdog (its deadline, or the end of its grace)."""
    return deadline + abandon_grace(timeout) if told else deadline


def too_many_abandoned(abandoned: int, limit: int) -> bool:
    """True once the threads abandoned and still running are more than the limit allows."""
    return abandoned > limit


# -- the watchdog thread -------------------------------------------------------------------

# How often at most the watchdog sleeps before looking again (an attempt may start meanwhile).
POLL = 0.25
Act = Callable[[Attempt], None]


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
        for a in self._holdings.snapshot():
            if a.state is not AttemptState.RUNNING or a.deadline is None or a.timeout is None:
                continue
            step = next_step(now, a.deadline, a.timeout, told=a.told)
            if step is Step.TELL:
                a.told = True
                self._tell(a)
            elif step is Step.ABANDON:
                self._abandon(a)
                continue
            wake = min(wake, wake_at(a.deadline, a.timeout, told=a.told))
        return wake


# -- what a timeout does ---------------------------------------------------------------------


def arm(attempt: Attempt) -> None:
    """As the handler starts (on its runner): its timeout, the job's own or its handler's, and
    the deadline the watchdog reads; the clock starts with the handler, not at the claim."""
    spec = attempt.spec
    attempt.timeout = effective_timeout(attempt.claimed.timeout, spec.timeout if spec is not None else None)
    attempt.runner = threading.current_thread()
    if attempt.timeout is not None:
        attempt.deadline = time.monotonic() + attempt.timeout


class Enforcer:
    def __init__(
        self,
        holdings: Holdings,
        runners: Runners,
        finisher: Finisher,
        metrics: WorkerMetrics,
        *,
        max_abandoned: int,
        give_up: Callable[[str], None],
    ) -> None:
        self._holdings = holdings
        self._runners = runners
        self._finisher = finisher
        self._metrics = metrics
        self._max_abandoned = max_abandoned
        self._give_up = give_up
        metrics.abandoned_threads.set_function(lambda: runners.abandoned)

    def tell(self, attempt: Attempt) -> None:
        """The deadline passed: the cooperative stop every handler sees (should_stop, sleep)."""
        timeout = attempt.timeout or 0.0
        log.warning(
            "job %s (%s): timed out after %s; telling the handler to stop (abandoned in %gs if it does not)",
            attempt.id,
            attempt.job_type,
            format_duration(timeout),
            abandon_grace(timeout),
        )
        self._metrics.timed_out.labels(self._metrics.type_label(attempt.job_type)).inc()
        attempt.job.request_stop(StopReason.TIMED_OUT)

    def abandon(self, attempt: Attempt) -> None:
        """The handler did not return: decide the attempt's outcome without it and write it
        (fenced, as any failure), free its slot, and never renew its lease again (once written
        it is not held). Its span ends with that write, the timeout recorded as its error. A
        batch handler's other jobs on that thread are abandoned with it: they are in the same call.
        A handler in a child process is not abandoned: its child is killed, and the runner waiting
        on it decides the call's outcomes (pgwork.worker.children)."""
        kill = attempt.kill
        if kill is not None:
            kill(f"its timeout's grace passed ({abandon_grace(attempt.timeout or 0.0):g}s after the timeout)")
            return
        if not self._decide_abandoned(attempt, attempt.timeout):
            return  # it returned (or was released) meanwhile: the runner decides
        thread = attempt.runner
        mates = [
            a
            for a in self._holdings.snapshot()
            if thread is not None and a is not attempt and a.runner is thread and a.state is AttemptState.RUNNING
        ]
        for mate in mates:
            mate.job.request_stop(StopReason.TIMED_OUT)
        abandoned_now = [attempt, *(m for m in mates if self._decide_abandoned(m, m.timeout or attempt.timeout))]
        stuck = self._runners.abandoned + (1 if thread is not None else 0)
        for a in abandoned_now:
            self._metrics.abandoned.labels(self._metrics.type_label(a.job_type)).inc()
        log.error(
            "job %s (%s): the handler did not return after being told to stop; its thread is abandoned "
            "(%d abandoned, --max-abandoned %d) and a new runner takes its place",
            attempt.id,
            attempt.job_type,
            stuck,
            self._max_abandoned,
        )
        if too_many_abandoned(stuck, self._max_abandoned):
            # First: the freed slot must start nothing more, and the write below may carry the
            # next claim (one round trip); a worker giving up claims nothing. What it holds
            # unstarted goes back at once, without running (issue 25).
            self._give_up(
                f"{stuck} handler threads are stuck past their timeouts (--max-abandoned {self._max_abandoned})"
            )
        if thread is not None:
            self._runners.abandon(thread)
        self._finisher.submit_many(abandoned_now)
        self._finisher.poke()

    def _decide_abandoned(self, attempt: Attempt, timeout: float | None) -> bool:
        with attempt.lock:
            if attempt.state is not AttemptState.RUNNING:
                return False
            attempt.state = AttemptState.FINISHING
            attempt.abandoned = True
        job = attempt.job
        attempt.decision = abandoned(
            job.stop_reason,
            timeout or 0.0,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            backoff=attempt.retry_delay(),
            now=datetime.now(UTC),
        )
        return True
