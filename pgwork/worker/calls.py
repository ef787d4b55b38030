"""Calling one attempt's handler: begin it, call it, decide its outcome, hand it to the finisher.

A plain handler is called on a runner thread (`run`), an `async def` one awaited as a task on the
worker's event loop (`run_async`); everything around the call is the same code, so both kinds
end in the same outcomes (pgwork.worker.outcome.decide) written by the same batched finishes.
A stop request (cancellation, lease lost, shutdown) reaches a plain handler through
`Job.should_stop`/`Job.sleep`, and an async one also as a CancelledError at the await it is in
(Runners.cancel); either way the stop reason, not what the handler then returns or raises,
decides the outcome. Everything this learns is kept on the Attempt (pgwork.worker.attempt).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from pgwork import tracing
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.describe import describe_error, payload_problem
from pgwork.worker.finishes import Finisher
from pgwork.worker.outcome import Ended, Outcome, decide, worker_error
from pgwork.worker.registry import PermanentError, StopReason, running
from pgwork.worker.timeouts import arm

log = logging.getLogger("pgwork.worker")


class Calls:
    def __init__(
        self,
        finisher: Finisher,
        *,
        tracer: trace.Tracer | None,
        worker_id: str,
        stopping: threading.Event,
        cancel: Callable[[Attempt], None],
    ) -> None:
        """`stopping`: set once the worker drains (jobs not yet started are not begun);
        `cancel`: cancels a running async job's task (Runners.cancel)."""
        self._finisher = finisher
        self._tracer = tracer
        self._worker_id = worker_id
        self._stopping = stopping
        self._cancel = cancel

    # -- the two kinds --------------------------------------------------------------------

    def run(self, attempt: Attempt) -> bool:
        """A plain handler's attempt, on a runner thread. True: its outcome was written (and the
        next claim made) by this call itself (Finisher.submit's shortcut)."""
        if not self._begin(attempt):
            return False
        inline = False
        try:
            attempt.span = self._start_span(attempt)
            inline = self._settle(attempt, self._ready(attempt) or self._call(attempt), on_loop=False)
        except BaseException as exc:  # a bug here must not take the process down
            self._failed(attempt, exc)
        return inline

    async def run_async(self, attempt: Attempt) -> None:
        """An async handler's attempt, as a task on the event loop."""
        if not self._begin(attempt):
            return
        # Past its timeout an async job is cancelled like any stopped one: there is no thread
        # for the watchdog to abandon (a task that swallows its cancellation keeps its slot).
        attempt.runner = None
        # Registered inside the task, once it runs: a stop request from now on cancels it at
        # the await it is in; one made earlier runs this at once and the handler is not called.
        attempt.job.when_stopped(lambda: self._cancel(attempt))
        try:
            attempt.span = self._start_span(attempt)
            self._settle(attempt, self._ready(attempt) or await self._call_async(attempt), on_loop=True)
        except BaseException as exc:  # a bug here must not take the loop down
            self._failed(attempt, exc)

    # -- around the call ------------------------------------------------------------------

    def _begin(self, attempt: Attempt) -> bool:
        if self._stopping.is_set():
            return False  # draining: jobs not yet started are released, not begun
        arm(attempt)
        if not attempt.transition({AttemptState.WAITING}, AttemptState.RUNNING):
            return False  # released on shutdown before it started
        attempt.started_at = time.monotonic()
        return True

    def _ready(self, attempt: Attempt) -> Ended | None:
        """How the attempt ends without calling the handler (an unreadable payload, or a job
        told to stop before it began), else None: call it."""
        unreadable = payload_problem(attempt.claimed)
        if unreadable is not None:
            return Ended(unreadable=unreadable)
        return Ended() if attempt.job.should_stop else None

    def _call(self, attempt: Attempt) -> Ended:
        assert attempt.spec is not None  # only registered types are claimed
        handler, span = attempt.spec.func, attempt.span
        try:
            if span is None:  # no tracer: no span to enter, once per job
                with running(attempt.job):
                    return _returned(handler(attempt.job))
            with running(attempt.job), self._using(span):
                return _returned(handler(attempt.job))
        except BaseException as exc:  # nothing a handler does may crash the worker
            return Ended(error=exc)

    async def _call_async(self, attempt: Attempt) -> Ended:
        assert attempt.spec is not None
        try:
            # The task runs in a copy of the loop's context: current_job() is this job inside it.
            with running(attempt.job), self._using(attempt.span):
                return Ended(value=await attempt.spec.func(attempt.job))
        except BaseException as exc:  # CancelledError too: the stop reason decides what it means
            return Ended(error=exc)

    @contextlib.contextmanager
    def _using(self, span: trace.Span | None) -> Iterator[None]:
        if span is None:
            yield
            return
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield

    def _start_span(self, attempt: Attempt) -> trace.Span | None:
        if self._tracer is None:
            return None
        c = attempt.claimed
        attributes = tracing.consumer_span_attributes(c.id, c.job_type, c.attempt, c.max_attempts, self._worker_id)
        return tracing.start_consumer_span(self._tracer, attempt.job.trace_context, attributes, c.job_type)

    def _settle(self, attempt: Attempt, ended: Ended, *, on_loop: bool) -> bool:
        """Decide the attempt and hand it to the finisher. True: written on this thread."""
        released = not attempt.transition({AttemptState.RUNNING}, AttemptState.FINISHING)
        if attempt.abandoned:
            # The watchdog decided this attempt without us; its token no longer holds the job.
            log.info("job %s: an abandoned handler returned late; nothing is written", attempt.id)
            return False
        job, span = attempt.job, attempt.span
        stop = job.stop_reason
        # Only a failure reads the backoff (a retry's delay): a success does not pay for it.
        failing = ended.error is not None or stop is StopReason.TIMED_OUT
        decision = decide(
            ended,
            stop,
            released=released,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            backoff=attempt.retry_delay() if failing else 0.0,
            now=datetime.now(UTC),
            timeout=attempt.timeout,
        )
        if decision.outcome is Outcome.RELEASED:
            # Shutdown gave it back while the handler ran; the releaser wrote and counted it.
            if span is not None:
                span.set_attribute(tracing.JOB_OUTCOME, Outcome.RELEASED.value)
                span.end()
            return False
        if span is not None and ended.error is not None and decision.error_type is not None:
            with contextlib.suppress(Exception):
                span.record_exception(
                    ended.error,
                    {"exception.message": decision.message or "", "exception.stacktrace": decision.error or ""},
                )
        attempt.decision = decision
        # A plain handler's runner may write its own outcome (a one-job worker's shortcut); the
        # event loop never does, as the write and its retries would block every async job.
        return self._finisher.submit(attempt, may_write=not on_loop)

    def _failed(self, attempt: Attempt, exc: BaseException) -> None:
        log.error("job %s: runner failed: %s", attempt.id, describe_error(exc))
        if (
            attempt.decision is not None
            or attempt.abandoned
            or not attempt.transition({AttemptState.RUNNING, AttemptState.FINISHING}, AttemptState.FINISHING)
        ):
            return
        # Recorded as a failed attempt (fenced: a job already finished is untouched), so the row
        # does not stay `running` until its lease lapses. The reaper is the backstop.
        text = f"pgwork worker error while finishing the job: {describe_error(exc)}"
        job = attempt.job
        attempt.decision = worker_error(text, job.attempt, job.max_attempts, attempt.retry_delay(), datetime.now(UTC))
        self._finisher.submit(attempt, may_write=False)


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


def _returned(value: Any) -> Ended:
    """What a plain handler returned. A coroutine means an async function the registry could not
    tell was one (a decorator that hid it): it was never awaited, and never will be."""
    if type(value) in _PLAIN:
        return Ended(value=value)  # most results: no need to ask whether it is awaitable
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # no "never awaited" warning on top of the failure
        return Ended(
            error=PermanentError(
                "the handler returned an awaitable instead of a result: a plain handler must return the value; "
                "register the coroutine function itself (async def), or a wrapper that is async def too"
            )
        )
    return Ended(value=value)
