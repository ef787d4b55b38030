"""The worker: claim, run handlers on a fixed pool of runners, write their outcomes in batches.

Threads: the main loop (claims and hands jobs to the runners), `--concurrency` runner threads
for plain handlers and one event-loop thread for `async def` handlers, sharing `--concurrency`
slots (pgwork.worker.runners), the finisher that writes decided outcomes a batch at a time
(pgwork.worker.finishes), the watchdog (pgwork.worker.timeouts), the heartbeat thread (its own
connection) and the listener thread (its own connection). Each claimed job is one Attempt
(pgwork.worker.attempt) from its claim to its finish; pgwork.worker.calls calls its handler. No
transaction is ever open while a handler runs: a handler's outcome is decided
(pgwork.worker.outcome) after it returns and written afterwards in a short transaction.

Shutdown (SIGTERM, or `request_stop()`; the drain is pgwork.worker.shutdown): stop claiming at
once; jobs claimed but not started go back to pending at once; running jobs get `grace` seconds
to finish; the rest are released (Queue.release: lease cleared, a note in last_error,
attempt_count kept because it counts claims). A second request releases at once. After a
graceful stop no row is left for the reaper.

Every wait after the stop request is bounded by one shutdown deadline: `grace` from the request
for running jobs, then RELEASE_SECONDS more for the releases (and any finishing writes). With the
database unreachable those writes give up at the deadline; the rows stay `running` with their
lease and the reaper returns them once it lapses.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from opentelemetry import trace

from pgwork import tracing
from pgwork.db import Queue
from pgwork.errors import PgworkError
from pgwork.jsonshape import result_problem
from pgwork.worker.bookkeeping import Bookkeeper
from pgwork.worker.calls import Calls
from pgwork.worker.children import ChildPool
from pgwork.worker.claims import ClaimGate, ClaimRoom
from pgwork.worker.describe import first_line
from pgwork.worker.finishes import Finisher
from pgwork.worker.heartbeat import TRANSIENT, Heartbeat
from pgwork.worker.holdings import Holdings
from pgwork.worker.metrics import MetricsServer, WorkerMetrics
from pgwork.worker.options import EXIT_POOLER, WorkerOptions
from pgwork.worker.plan import PIPELINE_MAX_BATCH, plan_handlers
from pgwork.worker.registry import Registry
from pgwork.worker.runners import Runners
from pgwork.worker.shutdown import Shutdown
from pgwork.worker.taking import Taking
from pgwork.worker.timeouts import EXIT_ABANDONED, Enforcer, Watchdog
from pgwork.worker.wakeup import WakeListener

log = logging.getLogger("pgwork.worker")

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
# After a claim that skipped a limited type (another session held its limit row past the claim's
# few milliseconds of patience), claim again this soon rather than after --poll: under heavy
# contention the row is free again within milliseconds; a holder that keeps it costs one claim
# per pause.
SKIPPED_RETRY_SECONDS = 0.05


def check_result(value: Any) -> str | None:
    """None if `value` can be stored as the job's JSON result, else why not (for last_error):
    not JSON, NaN or Infinity, a NUL or a lone surrogate, nested too deep, too large."""
    return result_problem(value)


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
        plan = plan_handlers(registry, options)
        types = plan.job_types
        self.queue = queue
        self.options = options
        self.registry = registry
        self.job_types = types
        self.metrics = metrics or WorkerMetrics()
        self.metrics.heartbeat_interval.set(options.heartbeat)
        # No provider given and none installed: no span per job at all (see tracing.configured).
        self._tracer = (
            trace.get_tracer("pgwork.worker", tracer_provider=tracer_provider)
            if tracing.configured(tracer_provider)
            else None
        )
        self.holdings = Holdings()
        self.metrics.watch(self.holdings, types)
        self._skipped = False
        queue.on_limit_skipped(self._limit_skipped)
        self._wake = threading.Event()
        self._stop = threading.Event()  # first request: stop claiming, drain
        self._force = threading.Event()  # second request: release at once
        self._grace_ends: float | None = None  # monotonic; set by the first stop request
        self._shutdown_deadline: float | None = None  # grace_ends + RELEASE_SECONDS
        self._heartbeat = Heartbeat(
            queue,
            self.holdings,
            self.metrics,
            interval=options.heartbeat,
            lease=options.lease,
            prepare=prepare and queue.pooling.prepares,
            owner=options.worker_id,
        )
        # Behind a transaction-mode pooler only a direct listen_dsn can carry LISTEN.
        listening = options.listen and queue.can_listen
        self._listener = WakeListener(queue, self._wake, frozenset(types)) if listening else None
        self._handlers = plan.handlers
        self._taking = Taking(queue, options, plan, self.holdings, metrics=self.metrics, stop=self._stop)
        # Process isolation: a pool of spawned children, one per runner, for the types that use it.
        self._children = (
            ChildPool(
                options.app,
                options.concurrency,
                max_jobs=options.max_jobs_per_child,
                max_memory=options.max_memory_per_child,
            )
            if plan.in_process
            else None
        )
        for t, (spec, _) in self._handlers.items():
            if spec.batch is not None:  # its batch series exist from the first scrape, at zero
                self.metrics.batch_size.labels(self.metrics.type_label(t))
                self.metrics.batch_wait.labels(self.metrics.type_label(t))
        plain, asynchronous = registry.kinds(types, options.isolation)
        self.runners = Runners(
            options.concurrency, threads=plain, loop=asynchronous, freed=self._wake, queued=self._taking.holds
        )
        self._taking.attach(self.runners)
        # The main loop and the finisher (whose write can carry the next claim) take turns.
        taking = self._taking
        self._gate = ClaimGate(ClaimRoom(options.worker_id, types, options.lease, taking.room, taking.took))
        self.finisher = Finisher(
            queue,
            Bookkeeper(self.metrics, self.holdings, self._wake, self._taking.ran),
            self.runners.is_busy,
            self._deadline,
            # A batch handler's worker claims its next batch beside the write, not after it
            # (pgwork.worker.plan.claim_ahead): the call after next waits for that claim.
            gate=self._gate if options.batch <= PIPELINE_MAX_BATCH and not plan.ahead else None,
            # One runner: it writes its own outcome (and claims its next job) without a hand-off;
            # not at a batch too large to claim with the write: its outcomes would go one per write
            # (1,400 jobs/s at --batch 100 against the finisher's batches).
            inline=options.concurrency == 1 and options.batch <= PIPELINE_MAX_BATCH,
        )
        self._calls = Calls(
            self.finisher,
            tracer=self._tracer,
            worker_id=options.worker_id,
            stopping=self._stop,
            cancel=self.runners.cancel,
            metrics=self.metrics,
            children=self._children,
        )
        enforcer = Enforcer(
            self.holdings,
            self.runners,
            self.finisher,
            self.metrics,
            max_abandoned=options.max_abandoned,
            give_up=self._give_up,
        )
        self._watchdog = Watchdog(self.holdings, enforcer.tell, enforcer.abandon)
        self._shutdown = Shutdown(
            queue, self.holdings, self.metrics, self._gate, deadline=self._deadline, remaining=self.remaining
        )
        self.exit_code = 0
        self._server: MetricsServer | None = None
        self._last_tick = time.monotonic()

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

    def _give_up(self, why: str) -> None:
        """Too many stuck threads: stop claiming, drain the rest, and exit non-zero so the pod
        is restarted (a thread cannot be killed; a process can)."""
        if self.exit_code == EXIT_ABANDONED:
            return
        log.error("%s: no new claims; draining, then exiting %d for a restart", why, EXIT_ABANDONED)
        self.exit_code = EXIT_ABANDONED
        self.request_stop()

    def _pooler_met(self) -> bool:
        """A transaction-mode pooler met without the setting (Queue.pooler_symptom): stop
        claiming, release everything held at once (the Queue already turned prepared statements
        off, so the releases go through), and exit EXIT_POOLER with one line naming the setting."""
        symptom = self.queue.pooler_symptom
        if symptom is None or self.exit_code == EXIT_POOLER:
            return symptom is not None
        log.error("%s; releasing the jobs held and exiting %d", symptom, EXIT_POOLER)
        self.exit_code = EXIT_POOLER
        now = time.monotonic()
        self._set_deadline(now)
        self._stop.set()
        self._force.set()
        self._wake.set()
        return True

    def _set_deadline(self, grace_ends: float) -> None:
        if self._grace_ends is not None and self._grace_ends <= grace_ends:
            return
        self._grace_ends = grace_ends
        self._shutdown_deadline = grace_ends + RELEASE_SECONDS
        # Every database wait, in every thread and already in progress, now ends by then.
        self.queue.give_up_at(self._shutdown_deadline)

    def _deadline(self) -> float | None:
        return self._shutdown_deadline

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
        return self._taking.claim_ok and not self._stop.is_set()

    @property
    def claims(self) -> int:
        """Jobs claimed so far."""
        return self._taking.claims

    def start_metrics(self) -> int:
        """Bind the metrics port now (so a busy port is a startup error). Returns the port."""
        if self.options.metrics_port == 0 or self._server is not None:
            return self._server.port if self._server else 0
        self._server = MetricsServer(self.options.metrics_port, self.metrics, self.healthy, self.ready)
        self._server.start()
        return self._server.port

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or, with --burst, until nothing is ready or running). Returns 0,
        or EXIT_ABANDONED after more handler threads got stuck than --max-abandoned allows."""
        self.start_metrics()
        self._heartbeat.start()
        calls = self._calls
        self.runners.start(
            calls.run,
            calls.run_async,
            run_batch=calls.run_batch,
            run_async_batch=calls.run_async_batch,
            idle=self.finisher.poke,
        )
        self.finisher.start()
        self._watchdog.start()
        if self._listener is not None:
            self._listener.start()
        if self._children is not None:
            self._children.start()
        log.info(
            "worker %s taking %s (concurrency %d%s%s, batch %d, lease %gs, heartbeat %gs, %s)",
            self.options.worker_id,
            ",".join(self.job_types),
            self.options.concurrency,
            self.runners.kinds(),
            "" if self._children is None else ", handlers in child processes",
            self.options.batch,
            self.options.lease,
            self.options.heartbeat,
            ("LISTEN + polling" if self._listener else "polling only")
            + ("" if self.queue.pooling.prepares else f", {self.queue.pooling.describe()}"),
        )
        try:
            if self._children is not None:
                self._children.wait_ready(self._stop)
            self._loop()
            self._drain()
        finally:
            self.runners.stop()
            self.finisher.stop()
            self.finisher.join(self.remaining() if self._shutdown_deadline is not None else None)
            self.runners.join(time.monotonic() + min(self.remaining(), JOIN_SECONDS), time.monotonic)
            self._watchdog.stop()
            if self._children is not None:
                self._children.close(min(self.remaining(), JOIN_SECONDS))
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
        return self.exit_code

    def _loop(self) -> None:
        claim_backoff = 0.0
        while not self._stop.is_set() and not self._pooler_met():
            self._last_tick = time.monotonic()
            self._wake.clear()
            if claim_backoff:
                self._stop.wait(claim_backoff)
                if self._stop.is_set():
                    break
            # A write under way will claim into the room itself, in its own round trip.
            if self.finisher.claims_next() or not self._gate.enter():
                self._wake.wait(self.options.poll)
                continue
            taking = self._taking
            try:
                room = taking.room()
                if room > 0:
                    try:
                        claimed = taking.claim(room)
                    except (*TRANSIENT, PgworkError) as exc:
                        if self._pooler_met():
                            break
                        taking.claim_ok = False
                        claim_backoff = min(max(claim_backoff * 2, 0.25), MAX_CLAIM_BACKOFF)
                        log.warning("claim failed (%s); retrying in %gs", first_line(exc), claim_backoff)
                        continue
                    claim_backoff = 0.0
                    taking.claim_ok = True
                    taking.claimed_full(len(claimed) == room)
                    if claimed:
                        taking.looked_again = False
                        taking.took(claimed, None)
                        if len(claimed) == room:
                            continue  # more may be ready
                    elif self.options.burst and len(self.holdings) == 0:
                        if not taking.held_back():
                            log.info("burst: no job ready and none running; exiting")
                            return
                        if not taking.looked_again:  # look again soon, once
                            taking.looked_again = self._skipped = True
            finally:
                self._gate.leave()
            skipped, self._skipped = self._skipped, False
            self._wake.wait(min(self.options.poll, SKIPPED_RETRY_SECONDS) if skipped else self.options.poll)

    def _limit_skipped(self, job_type: str) -> None:
        """A claim left out a limited type whose row another session held (migration 0018)."""
        self.metrics.claim_skipped(job_type)
        self._skipped = True

    # -- shutdown -------------------------------------------------------------------------

    def _drain(self) -> None:
        self._shutdown.drain(self.options.grace, self._grace_ends, self._force, RELEASE_SECONDS + self.options.grace)
