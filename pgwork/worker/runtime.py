"""The worker: claim, run handlers on their own threads, finish through the fenced Queue calls.

Threads: the main loop (claims and dispatches), one runner thread per job in flight, the
heartbeat thread (its own connection) and the listener thread (its own connection). No
transaction is ever open while a handler runs: every Queue call is one autocommitted statement.

Shutdown (SIGTERM, or `request_stop()`): stop claiming at once; jobs claimed but not started go
back to pending at once; running jobs get `grace` seconds to finish; the rest are released
(Queue.release: lease cleared, a note in last_error, attempt_count kept because it counts
claims). A second request releases at once. After a graceful stop no row is left for the reaper.

Every wait after the stop request is bounded by one shutdown deadline: `grace` from the request
for running jobs, then RELEASE_SECONDS more for the releases (and any finishing writes). With the
database unreachable those writes give up at the deadline; the rows stay `running` with their
lease and the reaper returns them once it lapses.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from opentelemetry import trace

from pgwork import tracing
from pgwork.decoding import undecodable_reason
from pgwork.dsn import redact
from pgwork.errors import InvalidArgument, PgworkError
from pgwork.models import ClaimedJob, Completion, FailOutcome
from pgwork.queue import Queue
from pgwork.validation import result_problem
from pgwork.worker.heartbeat import TRANSIENT, Heartbeat
from pgwork.worker.holdings import Held, HeldState, Holdings
from pgwork.worker.metrics import MetricsServer, WorkerMetrics
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import Job, PermanentError, Registry, StopReason
from pgwork.worker.wakeup import WakeListener

log = logging.getLogger("pgwork.worker")

T = TypeVar("T")
# Longest pause between claim attempts while the database is unreachable.
MAX_CLAIM_BACKOFF = 10.0
# A main loop that has not ticked for this long is reported unhealthy on /healthz.
STALL_SECONDS = 60.0
# After the grace, how long the releases (and writes of jobs finishing) may take before the
# worker gives up on them and leaves the rows to the reaper. Kept small: grace + this (+ closing
# the pool) must fit in the pod's terminationGracePeriodSeconds.
RELEASE_SECONDS = 2.0
# How long a stopping worker waits for its heartbeat and listener threads to close their connections.
JOIN_SECONDS = 1.0


def describe_error(exc: BaseException, limit: int = 4000) -> str:
    """What goes into last_error: the exception line first, then the end of the traceback, with
    any connection-string password redacted (a handler's exception may quote its own DSN)."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6)).strip()
    text = redact(f"{head}\n{tail}")
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"


def error_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def check_result(value: Any) -> str | None:
    """None if `value` can be stored as the job's JSON result, else why not (for last_error):
    not JSON, NaN or Infinity, a NUL or a lone surrogate, nested too deep, too large."""
    return result_problem(value)


def payload_problem(claimed: ClaimedJob) -> str | None:
    """Why a claimed job's payload cannot be handed to a handler, or None. Such a row was written
    by plain SQL (pgwork refuses these values at enqueue); it will never decode, so the job goes
    dead at once instead of being retried."""
    reason = undecodable_reason(claimed.payload)
    if reason is None and not isinstance(claimed.payload, dict):
        reason = f"a JSON {type(claimed.payload).__name__}, not an object"
    if reason is None:
        return None
    return (
        f"pgwork.UndecodablePayload: the payload of job {claimed.id} cannot be read: {reason}. "
        "It was not written by pgwork's enqueue (which refuses such values); fix the row's payload "
        "and run `pgwork retry ID`, or enqueue the work again"
    )


def usable_trace_context(claimed: ClaimedJob) -> dict[str, str]:
    """The claimed trace context if it is a map of strings, else none: tracing is advisory, so a
    row with an unreadable context still runs, just without its producer's trace."""
    value = claimed.trace_context
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    why = undecodable_reason(value) or f"a JSON {type(value).__name__}, not a map of strings"
    log.warning("job %s: ignoring its trace_context (%s)", claimed.id, why)
    return {}


class Worker:
    def __init__(
        self,
        queue: Queue,
        options: WorkerOptions,
        registry: Registry,
        *,
        metrics: WorkerMetrics | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        prepare: bool = True,
    ) -> None:
        types = list(options.job_types) if options.job_types is not None else registry.job_types()
        missing = [t for t in types if registry.get(t) is None]
        if missing:
            raise InvalidArgument(
                "--job-types",
                f"no handler registered for {', '.join(missing)} in {options.app}",
                f"register them with @pgwork.handler, or pick among {registry.job_types()}",
            )
        if not types:
            raise InvalidArgument(
                "--app", f"{options.app} registers no handlers", "decorate functions with @pgwork.handler('TYPE')"
            )
        self.queue = queue
        self.options = options
        self.registry = registry
        self.job_types = types
        self.metrics = metrics or WorkerMetrics()
        self.metrics.heartbeat_interval.set(options.heartbeat)
        self._tracer = trace.get_tracer("pgwork.worker", tracer_provider=tracer_provider)
        self.holdings = Holdings()
        self.metrics.watch(self.holdings, types)
        self._wake = threading.Event()
        self._stop = threading.Event()  # first request: stop claiming, drain
        self._force = threading.Event()  # second request: release at once
        self._grace_ends: float | None = None  # monotonic; set by the first stop request
        self._shutdown_deadline: float | None = None  # grace_ends + RELEASE_SECONDS
        self._heartbeat = Heartbeat(
            queue, self.holdings, self.metrics, interval=options.heartbeat, lease=options.lease, prepare=prepare
        )
        self._listener = WakeListener(queue, self._wake, frozenset(types)) if options.listen else None
        self._server: MetricsServer | None = None
        self._last_tick = time.monotonic()
        self._claim_ok = False
        self.claims = 0

    # -- control --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """First call: drain. Second call: release whatever still runs, at once."""
        now = time.monotonic()
        if self._stop.is_set():
            log.info("second stop request: releasing running jobs now")
            self._set_deadline(now)
            self._force.set()
        else:
            log.info("stop requested: no new claims; running jobs have %gs to finish", self.options.grace)
            self._set_deadline(now + self.options.grace)
            self._stop.set()
        self._wake.set()

    def _set_deadline(self, grace_ends: float) -> None:
        if self._grace_ends is not None and self._grace_ends <= grace_ends:
            return
        self._grace_ends = grace_ends
        self._shutdown_deadline = grace_ends + RELEASE_SECONDS
        # Every database wait, in every thread and already in progress, now ends by then.
        self.queue.give_up_at(self._shutdown_deadline)

    def remaining(self) -> float:
        """Seconds left before the shutdown deadline (infinite while not stopping)."""
        deadline = self._shutdown_deadline
        return float("inf") if deadline is None else max(0.0, deadline - time.monotonic())

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def healthy(self) -> bool:
        # A drain may outlast STALL_SECONDS; a liveness probe must not kill the pod mid-drain.
        return self._stop.is_set() or time.monotonic() - self._last_tick < STALL_SECONDS

    def ready(self) -> bool:
        return self._claim_ok and not self._stop.is_set()

    def start_metrics(self) -> int:
        """Bind the metrics port now (so a busy port is a startup error). Returns the port."""
        if self.options.metrics_port == 0 or self._server is not None:
            return self._server.port if self._server else 0
        self._server = MetricsServer(self.options.metrics_port, self.metrics, self.healthy, self.ready)
        self._server.start()
        return self._server.port

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or, with --burst, until nothing is ready or running). Returns 0."""
        self.start_metrics()
        self._heartbeat.start()
        if self._listener is not None:
            self._listener.start()
        log.info(
            "worker %s taking %s (concurrency %d, batch %d, lease %gs, heartbeat %gs, %s)",
            self.options.worker_id,
            ",".join(self.job_types),
            self.options.concurrency,
            self.options.batch,
            self.options.lease,
            self.options.heartbeat,
            "LISTEN + polling" if self._listener else "polling only",
        )
        try:
            self._loop()
            self._drain()
        finally:
            self._heartbeat.stop()
            if self._listener is not None:
                self._listener.stop()
            if self._server is not None:
                self._server.stop()
            # Let them close their connections, but never past the shutdown deadline: one stuck
            # connecting to an unreachable server is a daemon thread and dies with the process.
            until = time.monotonic() + min(self.remaining(), JOIN_SECONDS)
            for thread in (self._heartbeat, self._listener):
                if thread is not None and thread.is_alive():
                    thread.join(max(0.0, until - time.monotonic()))
            # The queue may outlive this worker (an embedding program, a test): its calls wait
            # as long as usual again.
            self.queue.give_up_at(None)
        log.info("worker %s stopped", self.options.worker_id)
        return 0

    def _loop(self) -> None:
        claim_backoff = 0.0
        while not self._stop.is_set():
            self._last_tick = time.monotonic()
            self._wake.clear()
            self._dispatch()
            if claim_backoff:
                self._stop.wait(claim_backoff)
                if self._stop.is_set():
                    break
            room = self._room()
            if room > 0:
                try:
                    claimed = self._claim(room)
                except (*TRANSIENT, PgworkError) as exc:
                    self._claim_ok = False
                    claim_backoff = min(max(claim_backoff * 2, 0.25), MAX_CLAIM_BACKOFF)
                    log.warning("claim failed (%s); retrying in %gs", _first_line(exc), claim_backoff)
                    continue
                claim_backoff = 0.0
                self._claim_ok = True
                if claimed:
                    for job in claimed:
                        self._hold(job)
                    self._dispatch()
                    if len(claimed) == room:
                        continue  # more may be ready
                elif self.options.burst and len(self.holdings) == 0:
                    log.info("burst: no job ready and none running; exiting")
                    return
            self._wake.wait(self.options.poll)

    def _room(self) -> int:
        """How many to claim now: only when no claimed job waits for a runner, up to capacity."""
        if self.holdings.count(HeldState.WAITING) > 0:
            return 0
        return max(0, self.options.capacity - len(self.holdings))

    def _claim(self, limit: int) -> list[ClaimedJob]:
        started = time.perf_counter()
        claimed = self.queue.claim(
            self.options.worker_id, job_types=self.job_types, limit=limit, lease=self.options.lease
        )
        self.metrics.claim_duration.observe(time.perf_counter() - started)
        self.claims += len(claimed)
        return claimed

    def _hold(self, claimed: ClaimedJob) -> None:
        job = Job(
            id=claimed.id,
            job_type=claimed.job_type,
            payload=claimed.payload if isinstance(claimed.payload, dict) else {},
            attempt=claimed.attempt,
            max_attempts=claimed.max_attempts,
            idempotency_key=claimed.idempotency_key,
            trace_context=usable_trace_context(claimed),
        )
        self.holdings.add(Held(claimed, job, self.options.lease))
        self.metrics.in_flight.set(len(self.holdings))

    def _dispatch(self) -> None:
        if self._stop.is_set():
            return  # draining: jobs not yet started are released, not begun
        running = self.holdings.count(HeldState.RUNNING) + self.holdings.count(HeldState.FINISHING)
        for held in self.holdings.snapshot():
            if running >= self.options.concurrency:
                return
            if held.transition({HeldState.WAITING}, HeldState.RUNNING):
                running += 1
                threading.Thread(
                    target=self._run_job, args=(held,), name=f"pgwork-job-{held.claimed.id}", daemon=True
                ).start()

    # -- one job --------------------------------------------------------------------------

    def _run_job(self, held: Held) -> None:
        try:
            attributes = tracing.consumer_span_attributes(
                held.claimed.id,
                held.claimed.job_type,
                held.claimed.attempt,
                held.claimed.max_attempts,
                self.options.worker_id,
            )
            with tracing.consumer_span(self._tracer, held.job.trace_context, attributes, held.claimed.job_type) as span:
                outcome = self._execute(held, span)
                span.set_attribute(tracing.JOB_OUTCOME, outcome)
            if outcome != "released":  # the releaser counted it
                self.metrics.finished(held.claimed.job_type, outcome, time.monotonic() - held.claimed_at)
        except BaseException as exc:  # a bug here must not take the process down
            log.error("job %s: runner failed: %s", held.claimed.id, redact(describe_error(exc)))
            self._fail_after_runner_error(held, exc)
        finally:
            self.holdings.remove(held.claimed.id)
            self.metrics.in_flight.set(len(self.holdings))
            self._wake.set()

    def _fail_after_runner_error(self, held: Held, exc: BaseException) -> None:
        """Record a worker bug as a failed attempt (fenced: a job already finished is untouched),
        so the row does not stay `running` until its lease lapses. The reaper is the backstop."""
        if not held.transition({HeldState.RUNNING, HeldState.FINISHING}, HeldState.RELEASED):
            return
        text = f"pgwork worker error while finishing the job: {describe_error(exc)}"
        try:
            self._finish(held, "record the failure", lambda: self.queue.fail(held.lease, text))
        except Exception as inner:
            log.error("job %s: could not record the failure (%s); the reaper will return it", held.claimed.id, inner)

    def _execute(self, held: Held, span: trace.Span) -> str:
        job = held.job
        value: Any = None
        failure: BaseException | None = None
        unreadable = payload_problem(held.claimed)
        if unreadable is not None:
            return self._refuse_undecodable(held, span, unreadable)
        if not job.should_stop:
            handler = self.registry.get(job.job_type)
            assert handler is not None  # only registered types are claimed
            try:
                value = handler(job)
            except BaseException as exc:  # nothing a handler does may crash the worker
                failure = exc
        if not held.transition({HeldState.RUNNING}, HeldState.FINISHING):
            return "released"  # shutdown gave it back while the handler ran; write nothing
        lease = held.lease
        if job.cancelled:
            acknowledged = self._finish(
                held, "acknowledge the cancellation", lambda: self.queue.acknowledge_cancel(lease)
            )
            log.info("job %s: cancelled while running; stopped", job.id)
            return "cancelled" if acknowledged else self._lost(held, span)
        if job.lease_lost:
            return self._lost(held, span)
        if failure is not None:
            retryable = not isinstance(failure, PermanentError)
            # Both read str(failure), which a handler's own exception class may break.
            text = describe_error(failure)
            message = redact(safe_str(failure))
            with contextlib.suppress(Exception):
                span.record_exception(failure, {"exception.message": message, "exception.stacktrace": text})
            tracing.mark_error(span, error_type(failure), message)
            result = self._finish(held, "record the failure", lambda: self.queue.fail(lease, text, retryable=retryable))
            if result is None or result.outcome is FailOutcome.LEASE_LOST:
                return self._lost(held, span)
            outcome = "retry" if result.outcome is FailOutcome.RETRY else "dead"
            log.warning(
                "job %s (%s) attempt %d failed -> %s: %s",
                job.id,
                job.job_type,
                job.attempt,
                outcome,
                _first_line(failure),
            )
            return outcome
        problem = check_result(value)
        if problem is not None:
            tracing.mark_error(span, "invalid_result", problem)
            result = self._finish(held, "record the failure", lambda: self.queue.fail(lease, problem, retryable=False))
            if result is None or result.outcome is FailOutcome.LEASE_LOST:
                return self._lost(held, span)
            log.warning("job %s (%s): %s -> dead", job.id, job.job_type, problem)
            return "dead"
        try:
            completion = self._finish(held, "record the success", lambda: self.queue.succeed(lease, value))
        except (psycopg.DataError, InvalidArgument) as exc:
            # The database refused this result (check_result missed a case): a permanent failure,
            # not a runner crash that would leave the job to the reaper.
            refusal = f"the result could not be stored: {_first_line(exc)}"
            tracing.mark_error(span, "invalid_result", refusal)
            failed = self._finish(held, "record the failure", lambda: self.queue.fail(lease, refusal, retryable=False))
            return "dead" if failed is not None and failed.outcome is FailOutcome.DEAD else self._lost(held, span)
        if completion is None or completion is Completion.LEASE_LOST:
            return self._lost(held, span)
        return "succeeded" if completion is Completion.CREATED else "duplicate"

    def _refuse_undecodable(self, held: Held, span: trace.Span, problem: str) -> str:
        if not held.transition({HeldState.RUNNING}, HeldState.FINISHING):
            return "released"
        tracing.mark_error(span, "undecodable_payload", problem)
        lease = held.lease
        result = self._finish(held, "record the failure", lambda: self.queue.fail(lease, problem, retryable=False))
        if result is None or result.outcome is FailOutcome.LEASE_LOST:
            return self._lost(held, span)
        log.error("job %s (%s): %s -> dead", held.claimed.id, held.claimed.job_type, problem)
        return "dead"

    def _lost(self, held: Held, span: trace.Span) -> str:
        tracing.mark_error(span, "lease_lost", "the lease was lost; the effect was not written")
        log.warning("job %s: lease lost; result discarded (another worker or the reaper has it)", held.claimed.id)
        return "lease_lost"

    def _finish(self, held: Held, what: str, write: Callable[[], T]) -> T | None:
        """Run a fenced write, retrying lost connections until the lease would have lapsed or,
        once stopping, until the shutdown deadline, whichever comes first."""
        pause = 0.1
        while True:
            try:
                return write()
            except TRANSIENT as exc:
                shutdown = self._shutdown_deadline
                give_up = held.lease_deadline if shutdown is None else min(held.lease_deadline, shutdown)
                if time.monotonic() + pause >= give_up:
                    why = "its lease lapsed" if give_up == held.lease_deadline else "the shutdown deadline"
                    log.error(
                        "job %s: could not %s before %s (%s); the row stays running and the reaper "
                        "returns it once the lease lapses",
                        held.claimed.id,
                        what,
                        why,
                        _first_line(exc),
                    )
                    return None
                log.warning(
                    "job %s: could not %s (%s); retrying in %gs", held.claimed.id, what, _first_line(exc), pause
                )
                time.sleep(pause)
                pause = min(pause * 2, 2.0)

    # -- shutdown -------------------------------------------------------------------------

    def _drain(self) -> None:
        for held in self.holdings.snapshot():
            if held.transition({HeldState.WAITING}, HeldState.RELEASED):
                self._release(held, "released unstarted on shutdown")
                self.holdings.remove(held.claimed.id)
        # The grace counts from the stop request, not from here: the claim loop may have spent
        # part of it waiting on an unreachable database.
        deadline = self._grace_ends if self._grace_ends is not None else time.monotonic() + self.options.grace
        if len(self.holdings):
            log.info("waiting up to %gs for %d running job(s)", self.options.grace, len(self.holdings))
        if self.holdings.wait_until_empty_or(deadline, self._force):
            return
        why = "second stop signal" if self._force.is_set() else f"grace of {self.options.grace:g}s ran out"
        for held in self.holdings.snapshot():
            if held.transition({HeldState.RUNNING, HeldState.WAITING}, HeldState.RELEASED):
                held.job.request_stop(StopReason.SHUTDOWN)
                self._release(held, f"released on shutdown ({why})")
                self.holdings.remove(held.claimed.id)
        # Finishing writes are short; let them land before the process exits, but only until the
        # shutdown deadline (their retries give up by then too).
        self.holdings.wait_until_empty_or(time.monotonic() + min(self.remaining(), 5.0), threading.Event())
        self.metrics.in_flight.set(len(self.holdings))

    def _release(self, held: Held, note: str) -> None:
        released = self._finish(held, "release it", lambda: self.queue.release(held.lease, note))
        if released:
            outcome = "released"
        elif released is None:
            outcome = "lease_lost"  # gave up writing; the reaper will return it
        else:
            # A release is refused when the lease is gone or a cancellation was requested;
            # the fenced acknowledgement tells the two apart (it matches only a held row).
            acked = self._finish(
                held, "acknowledge the cancellation", lambda: self.queue.acknowledge_cancel(held.lease)
            )
            outcome = "cancelled" if acked else "lease_lost"
        log.info("job %s: %s -> %s", held.claimed.id, note, outcome)
        self.metrics.finished(held.claimed.job_type, outcome, time.monotonic() - held.claimed_at)


def safe_str(exc: BaseException) -> str:
    """str(exc), or a stand-in when the exception's own __str__ raises (a handler's bug must
    never stop the worker from recording the failure)."""
    try:
        return str(exc)
    except Exception as inner:
        return f"<str() of {type(exc).__name__} raised {type(inner).__name__}>"


def _first_line(exc: BaseException) -> str:
    text = redact(safe_str(exc)).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
