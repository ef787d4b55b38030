"""Calling one attempt's handler: begin it, call it, decide its outcome, hand it to the finisher.

A plain handler is called on a runner thread (`run`), an `async def` one awaited as a task on the
worker's event loop (`run_async`); everything around the call is the same code, so both kinds
end in the same outcomes (pgwork.worker.outcome.decide) written by the same batched finishes.
A stop request (cancellation, lease lost, shutdown) reaches a plain handler through
`Job.should_stop`/`Job.sleep`, and an async one also as a CancelledError at the await it is in
(Runners.cancel); either way the stop reason, not what the handler then returns or raises,
decides the outcome. Everything this learns is kept on the Attempt (pgwork.worker.attempt).

A batch handler's jobs (`run_batch`, `run_async_batch`) are begun, spanned and decided one by one
around a single call with the list of those still to run; each entry it returns is that job's
ending (an exception instance: that job failed), and its outcomes are handed over together, to be
written in one transaction. A job told to stop while the call ran ends by its stop reason, whatever
its entry says; the others keep theirs. An async batch's task is cancelled only once every job in
it is told to stop.
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
from pgwork.worker.children import ChildPool, job_fields
from pgwork.worker.describe import describe_error, payload_problem
from pgwork.worker.finishes import Finisher
from pgwork.worker.job import PermanentError, StopReason, running
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import Ended, Outcome, decide, worker_error
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
        metrics: WorkerMetrics | None = None,
        children: ChildPool | None = None,
    ) -> None:
        """`stopping`: set once the worker drains (jobs not yet started are not begun);
        `cancel`: cancels a running async job's task, or a batch's by its first job
        (Runners.cancel); `metrics`: where batch sizes and fill waits are observed."""
        self._metrics = metrics or WorkerMetrics()
        self._finisher = finisher
        self._tracer = tracer
        self._worker_id = worker_id
        self._stopping = stopping
        self._cancel = cancel
        self._children = children  # runs the attempts whose handler is process-isolated

    # -- the two kinds --------------------------------------------------------------------

    def run(self, attempt: Attempt) -> bool:
        """A plain handler's attempt, on a runner thread. True: its outcome was written (and the
        next claim made) by this call itself (Finisher.submit's shortcut)."""
        if not self._begin(attempt):
            return False
        try:
            attempt.span = self._start_span(attempt)
            if self._decided(attempt, self._ready(attempt) or self._call(attempt)):
                # A plain handler's runner may write its own outcome (a one-job worker's shortcut).
                return self._finisher.submit(attempt)
        except BaseException as exc:  # a bug here must not take the process down
            self._failed(attempt, exc)
        return False

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
            if self._decided(attempt, self._ready(attempt) or await self._call_async(attempt)):
                # Never written on the loop: the write and its retries would block every async job.
                self._finisher.submit(attempt, may_write=False)
        except BaseException as exc:  # a bug here must not take the loop down
            self._failed(attempt, exc)

    def run_batch(self, attempts: list[Attempt]) -> bool:
        """A plain batch handler's jobs, on a runner thread: one call for them all. Always
        False: the finisher's thread writes their outcomes."""
        begun = self._begin_batch(attempts)
        if not begun:
            return False
        try:
            todo = self._todo(begun)
            if todo:
                jobs = [a.job for a in todo]
                if todo[0].in_process and self._children is not None:
                    self._ended(todo, self._children.run_batch(todo, [job_fields(j) for j in jobs]))
                else:
                    try:
                        self._ended(todo, _batch_returned(_func(todo)(jobs), len(jobs)))
                    except BaseException as exc:  # nothing a handler does may crash the worker
                        self._ended(todo, exc)
            # Written by the finisher's thread, at once: this runner goes on to the next call
            # (claimed ahead, pgwork.worker.plan.claim_ahead) while the write, and the claim
            # riding on it, run beside it.
            self._finisher.submit_many([a for a in begun if self._settled(a)], may_write=False, linger=False)
        except BaseException as exc:
            for a in begun:
                self._failed(a, exc)
        return False

    async def run_async_batch(self, attempts: list[Attempt]) -> None:
        """An async batch handler's jobs, as one task on the event loop."""
        begun = self._begin_batch(attempts)
        if not begun:
            return
        for a in begun:
            a.runner = None
            # A job's stop alone does not cancel the call the others are in: once all are told.
            a.job.when_stopped(lambda: self._stop_batch(begun, attempts[0]))
        try:
            todo = self._todo(begun)
            if todo:
                jobs = [a.job for a in todo]
                try:
                    self._ended(todo, _batch_returned(await _func(todo)(jobs), len(jobs)))
                except BaseException as exc:  # CancelledError too: the stop reasons decide
                    self._ended(todo, exc)
            self._finisher.submit_many([a for a in begun if self._settled(a)], may_write=False, linger=False)
        except BaseException as exc:
            for a in begun:
                self._failed(a, exc)

    # -- around a batch's call ------------------------------------------------------------

    def _begin_batch(self, attempts: list[Attempt]) -> list[Attempt]:
        begun = [a for a in attempts if self._begin(a)]
        if begun:
            first = min(a.claimed_at for a in begun)
            self._metrics.batch_size.labels(self._metrics.type_label(begun[0].job_type)).observe(len(begun))
            self._metrics.batch_wait.labels(self._metrics.type_label(begun[0].job_type)).observe(
                time.monotonic() - first
            )
        return begun

    def _todo(self, begun: list[Attempt]) -> list[Attempt]:
        """Start each job's span; settle those that end without the call; the rest are called."""
        todo = []
        for a in begun:
            a.span = self._start_span(a)
            ready = self._ready(a)
            if ready is None:
                todo.append(a)
            else:
                a.ended = ready
        return todo

    def _ended(self, todo: list[Attempt], returned: list[Ended] | BaseException) -> None:
        for index, a in enumerate(todo):
            a.ended = Ended(error=returned) if isinstance(returned, BaseException) else returned[index]

    def _settled(self, a: Attempt) -> bool:
        ended, a.ended = a.ended, None
        return ended is not None and self._decided(a, ended)

    def _stop_batch(self, begun: list[Attempt], first: Attempt) -> None:
        """Cancel the batch's task (keyed by its first job, begun or not) once all are told to stop."""
        if all(a.job.should_stop for a in begun):
            self._cancel(first)

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
        if attempt.in_process and self._children is not None:
            return self._children.run(attempt, job_fields(attempt.job))
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

    def _decided(self, attempt: Attempt, ended: Ended) -> bool:
        """Decide the attempt (its `decision`). True: hand it to the finisher; False: nothing to
        write (abandoned, or released on shutdown meanwhile)."""
        released = not attempt.transition({AttemptState.RUNNING}, AttemptState.FINISHING)
        if attempt.started_at is not None:
            attempt.ran = time.monotonic() - attempt.started_at
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
        return True

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


def _func(todo: list[Attempt]) -> Callable[..., Any]:
    spec = todo[0].spec
    assert spec is not None  # only registered types are claimed
    return spec.func


def _batch_returned(value: Any, count: int) -> list[Ended]:
    """What a batch handler returned for `count` jobs: one ending per job, in order (an exception
    instance in a job's place fails that job). Anything else fails every job of the call."""
    if inspect.iscoroutine(value):
        value.close()
    if not isinstance(value, list | tuple) or len(value) != count:
        what = f"{len(value)} entries" if isinstance(value, list | tuple) else f"a {type(value).__name__}"
        raise RuntimeError(
            f"the batch handler returned {what} for {count} jobs: return a list with one result (or an "
            "exception, to fail that job alone) per job, in the order of the jobs it was given"
        )
    return [Ended(error=v) if isinstance(v, BaseException) else Ended(value=v) for v in value]


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
