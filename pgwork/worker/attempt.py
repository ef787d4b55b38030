"""One attempt of one job: call its handler, decide the outcome, hand it to the finisher.

A plain handler is called on a runner thread (`run`), an `async def` one awaited as a task on the
worker's event loop (`run_async`); everything around the call is the same code, so both kinds
end in the same outcomes (pgwork.worker.outcome.decide) written by the same batched finishes.
A stop request (cancellation, lease lost, shutdown) reaches a plain handler through
`Job.should_stop`/`Job.sleep`, and an async one also as a CancelledError at the await it is in
(Runners.cancel); either way the stop reason, not what the handler then returns or raises,
decides the outcome.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from pgwork import tracing
from pgwork.db import Queue
from pgwork.worker.describe import describe_error, payload_problem
from pgwork.worker.enforce import arm
from pgwork.worker.finishes import Finisher, Pending
from pgwork.worker.holdings import Held, HeldState
from pgwork.worker.outcome import Decision, Ended, Outcome, decide, worker_error
from pgwork.worker.registry import PermanentError, Registry, StopReason, running

log = logging.getLogger("pgwork.worker")


@dataclass
class _Run:
    held: Held
    on_loop: bool = False  # an async handler's attempt, on the event loop
    span: trace.Span | None = None
    submitted: bool = False
    inline: bool = False  # the outcome was written (and the next claim made) by this attempt itself


class Attempts:
    def __init__(
        self,
        queue: Queue,
        registry: Registry,
        finisher: Finisher,
        *,
        tracer: trace.Tracer | None,
        worker_id: str,
        stopping: threading.Event,
        freed: Callable[[], None],
        cancel: Callable[[Held], None],
    ) -> None:
        """`stopping`: set once the worker drains (jobs not yet started are not begun);
        `freed`: called when a job ends, so the claim loop may claim again; `cancel`: cancels a
        running async job's task (Runners.cancel)."""
        self._queue = queue
        self._registry = registry
        self._finisher = finisher
        self._tracer = tracer
        self._worker_id = worker_id
        self._stopping = stopping
        self._freed = freed
        self._cancel = cancel
        self._async: dict[str, bool] = {}

    def is_async(self, held: Held) -> bool:
        # Asked per job by the runners; the registry's answer inspects the function each time.
        job_type = held.claimed.job_type
        known = self._async.get(job_type)
        if known is None:
            known = self._async[job_type] = self._registry.is_async(job_type)
        return known

    # -- the two kinds --------------------------------------------------------------------

    def run(self, held: Held) -> None:
        """A plain handler's attempt, on a runner thread."""
        if not self._begin(held):
            return
        run = _Run(held)
        try:
            run.span = self._start_span(held)
            self._settle(run, self._ready(held) or self._call(held, run.span))
        except BaseException as exc:  # a bug here must not take the process down
            self._failed(run, exc)
        finally:
            self._after(run)

    async def run_async(self, held: Held) -> None:
        """An async handler's attempt, as a task on the event loop."""
        if not self._begin(held):
            return
        # Past its timeout an async job is cancelled like any stopped one: there is no thread
        # for the watchdog to abandon (a task that swallows its cancellation keeps its slot).
        held.runner = None
        # Registered inside the task, once it runs: a stop request from now on cancels it at
        # the await it is in; one made earlier runs this at once and the handler is not called.
        held.job.when_stopped(lambda: self._cancel(held))
        run = _Run(held, on_loop=True)
        try:
            run.span = self._start_span(held)
            self._settle(run, self._ready(held) or await self._call_async(held, run.span))
        except BaseException as exc:  # a bug here must not take the loop down
            self._failed(run, exc)
        finally:
            self._after(run)

    # -- around the call ------------------------------------------------------------------

    def _begin(self, held: Held) -> bool:
        if self._stopping.is_set():
            return False  # draining: jobs not yet started are released, not begun
        spec = self._registry.spec(held.claimed.job_type)
        arm(held, spec.timeout if spec is not None else None)
        if not held.transition({HeldState.WAITING}, HeldState.RUNNING):
            return False  # released on shutdown before it started
        held.started_at = time.monotonic()
        return True

    def _ready(self, held: Held) -> Ended | None:
        """How the attempt ends without calling the handler (an unreadable payload, or a job
        told to stop before it began), else None: call it."""
        unreadable = payload_problem(held.claimed)
        if unreadable is not None:
            return Ended(unreadable=unreadable)
        return Ended() if held.job.should_stop else None

    def _handler(self, held: Held) -> Callable[..., Any]:
        handler = self._registry.get(held.claimed.job_type)
        assert handler is not None  # only registered types are claimed
        return handler

    def _call(self, held: Held, span: trace.Span | None) -> Ended:
        try:
            if span is None:  # no tracer: no span to enter, once per job
                with running(held.job):
                    return _returned(self._handler(held)(held.job))
            with running(held.job), self._using(span):
                return _returned(self._handler(held)(held.job))
        except BaseException as exc:  # nothing a handler does may crash the worker
            return Ended(error=exc)

    async def _call_async(self, held: Held, span: trace.Span | None) -> Ended:
        try:
            # The task runs in a copy of the loop's context: current_job() is this job inside it.
            with running(held.job), self._using(span):
                return Ended(value=await self._handler(held)(held.job))
        except BaseException as exc:  # CancelledError too: the stop reason decides what it means
            return Ended(error=exc)

    @contextlib.contextmanager
    def _using(self, span: trace.Span | None) -> Iterator[None]:
        if span is None:
            yield
            return
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield

    def _start_span(self, held: Held) -> trace.Span | None:
        if self._tracer is None:
            return None
        c = held.claimed
        attributes = tracing.consumer_span_attributes(c.id, c.job_type, c.attempt, c.max_attempts, self._worker_id)
        return tracing.start_consumer_span(self._tracer, held.job.trace_context, attributes, c.job_type)

    def _decide(self, held: Held, ended: Ended, *, released: bool) -> Decision:
        job = held.job
        stop = job.stop_reason
        # Only a failure reads the backoff (a retry's delay): a success does not pay for it.
        failing = ended.error is not None or stop is StopReason.TIMED_OUT
        return decide(
            ended,
            stop,
            released=released,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            backoff=self._queue.backoff_for(held.claimed.job_type).delay(job.attempt) if failing else 0.0,
            now=datetime.now(UTC),
            timeout=held.timeout,
        )

    def _settle(self, run: _Run, ended: Ended) -> None:
        held, span = run.held, run.span
        released = not held.transition({HeldState.RUNNING}, HeldState.FINISHING)
        if held.abandoned:
            # The watchdog failed this attempt without us; its token no longer holds the job.
            log.info("job %s: an abandoned handler returned late; nothing is written", held.claimed.id)
            return
        decision = self._decide(held, ended, released=released)
        if decision.outcome is Outcome.RELEASED:
            # Shutdown gave it back while the handler ran; the releaser wrote and counted it.
            if span is not None:
                span.set_attribute(tracing.JOB_OUTCOME, Outcome.RELEASED.value)
                span.end()
            return
        if span is not None and ended.error is not None and decision.error_type is not None:
            with contextlib.suppress(Exception):
                span.record_exception(
                    ended.error,
                    {"exception.message": decision.message or "", "exception.stacktrace": decision.error or ""},
                )
        run.submitted = True
        # A plain handler's runner may write its own outcome (a one-job worker's shortcut); the
        # event loop never does, as the write and its retries would block every async job.
        run.inline = self._finisher.submit(Pending(held, decision, span), may_write=not run.on_loop)

    def _failed(self, run: _Run, exc: BaseException) -> None:
        held = run.held
        log.error("job %s: runner failed: %s", held.claimed.id, describe_error(exc))
        if (
            run.submitted
            or held.abandoned
            or not held.transition({HeldState.RUNNING, HeldState.FINISHING}, HeldState.FINISHING)
        ):
            return
        # Recorded as a failed attempt (fenced: a job already finished is untouched), so the row
        # does not stay `running` until its lease lapses. The reaper is the backstop.
        text = f"pgwork worker error while finishing the job: {describe_error(exc)}"
        job = held.job
        backoff = self._queue.backoff_for(held.claimed.job_type).delay(job.attempt)
        failed = worker_error(text, job.attempt, job.max_attempts, backoff, datetime.now(UTC))
        self._finisher.submit(Pending(held, failed, run.span), may_write=False)

    def _after(self, run: _Run) -> None:
        if run.inline:
            return  # the write already claimed into this slot's room, and woke the main loop
        self._freed()  # a slot is free: the main loop may claim again


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
