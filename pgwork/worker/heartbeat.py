"""The heartbeat thread: renews every held lease in one statement, on its own connection.

Runs outside any transaction (autocommit). A renewal that matches no row means the lease was
lost; one that reports a cancellation request passes it on. Both reach the handler through its
`Job`, and the runner then never writes the effect. If the database is unreachable, a job whose
lease has lapsed by our own clock is treated as lost too: the reaper may have handed it on.

The worker registers a worker lease as it starts (migration 0015) and passes it with every
renewal: the first renewal after a claim adopts the job (its row written once), and from then on
all its jobs are renewed by the worker lease's one row, not one row each. When the answer says
the registration is no longer ours (taken over under the same name, or deleted after the
database was unreachable for long), the worker registers again: its jobs are renewed row by row
by that same statement and adopted again by the next, so none is lost meanwhile. A job given up
here (lease lapsed by our clock) is no longer passed, and the database stops covering it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import psycopg

from pgwork.db import AnyConnection, Queue, connect
from pgwork.errors import PgworkError, PoolerNeeded
from pgwork.models import Lease, LeaseState, Renewal, WorkerLease
from pgwork.progress import Progress
from pgwork.worker.attempt import AttemptState
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import StopReason
from pgwork.worker.metrics import WorkerMetrics

log = logging.getLogger("pgwork.worker.heartbeat")

# PoolerNeeded: the Queue turned prepared statements off on meeting a pooler; the same write
# succeeds when repeated (and the worker, told by Queue.pooler_symptom, stops).
TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError, PoolerNeeded)
# The ready ring's segment period (pgwork.ready_segment, migration 23): a segment stops taking new
# rows at each multiple of it, epoch time.
SEGMENT_SECONDS = 10.0
# A busy worker rotates this long after each boundary: past it by the server's clock too, give or
# take a second of skew between the two clocks.
ROTATE_AFTER_BOUNDARY = 1.0
_RENEWED = (AttemptState.WAITING, AttemptState.RUNNING, AttemptState.FINISHING)


def seconds_to_rotation(wall: float, period: float = SEGMENT_SECONDS, after: float = ROTATE_AFTER_BOUNDARY) -> float:
    """Seconds from the epoch time `wall` to the next rotation: `after` past a multiple of
    `period` (pure)."""
    return (after - wall) % period


class Heartbeat(threading.Thread):
    def __init__(
        self,
        queue: Queue,
        holdings: Holdings,
        metrics: WorkerMetrics,
        *,
        interval: float,
        lease: float,
        prepare: bool = True,
        owner: str | None = None,
    ) -> None:
        super().__init__(name="pgwork-heartbeat", daemon=True)
        self._queue = queue
        # The worker lease's owner (the worker id its claims carry); None: renew row by row only.
        self._owner = owner
        self._worker: WorkerLease | None = None
        self._holdings = holdings
        self._metrics = metrics
        self.interval = interval
        self.lease = lease
        self._prepare = prepare
        self._conn: AnyConnection | None = None
        self._stop_event = threading.Event()
        self.rounds = 0
        # Holdings.added when the ring was last rotated: a worker that claimed nothing since is idle.
        self._added_at_rotation = 0

    def stop(self) -> None:
        self._stop_event.set()

    def start(self) -> None:
        # Registered before the thread, so the first round already adopts the first claims.
        self.register()
        super().start()

    @property
    def registered(self) -> bool:
        return self._worker is not None

    def register(self) -> bool:
        """Register (again) for a worker lease, on the heartbeat's connection. False when the
        database cannot be reached: the next round tries again, and the jobs held meanwhile are
        renewed row by row."""
        if self._owner is None:
            return False
        try:
            self._worker = self._queue.register_worker(self._owner, lease_seconds=self.lease, conn=self._connection())
        except (*TRANSIENT, PgworkError) as exc:
            self._close()
            self._worker = None
            log.warning("worker lease not registered (%s); will retry", str(exc).strip().splitlines()[0])
            return False
        except psycopg.Error as exc:
            # Not a passing fault (e.g. a role without the privilege): renew row by row, as
            # before worker leases, rather than stop the worker or retry every round.
            self._owner = self._worker = None
            log.warning("worker lease refused (%s); renewing each job's lease", str(exc).strip().splitlines()[0])
            return False
        return True

    def run(self) -> None:
        next_beat = time.monotonic() + self.interval
        while True:
            to_beat = next_beat - time.monotonic()
            to_rotation = seconds_to_rotation(time.time())
            if self._stop_event.wait(max(0.0, min(to_beat, to_rotation))):
                break
            try:
                if to_beat <= to_rotation:
                    next_beat = time.monotonic() + self.interval
                    self.beat()
                if to_rotation <= to_beat:  # both when they fall due together
                    self.rotate()
            except Exception:  # never let the heartbeat thread die: the leases depend on it
                log.exception("heartbeat round failed unexpectedly")
        self._close()

    def _connection(self) -> AnyConnection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._queue.dsn, application_name=f"{self._queue.application_name}-heartbeat")
            if not self._prepare or not self._queue.prepares:
                self._conn.prepare_threshold = None
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _send(self, leases: list[Lease], worker: WorkerLease | None, progress: dict[int, Progress]) -> Renewal:
        """One renewal. A connection that was open before fails at once when the server dropped
        it (a restart, a failover, a terminated backend): then one retry on a new connection, so
        a dropped session costs no interval of the lease. A renewal is safe to repeat."""
        reused = self._conn is not None and not self._conn.closed
        try:
            return self._queue.renew(
                leases, lease_seconds=self.lease, worker=worker, conn=self._connection(), progress=progress
            )
        except TRANSIENT:
            if not reused:
                raise
            self._close()
        return self._queue.renew(
            leases, lease_seconds=self.lease, worker=worker, conn=self._connection(), progress=progress
        )

    def rotate(self) -> None:
        """A busy worker (one that claimed since its last rotation, or holds jobs) truncates the ready
        ring's drained segments (migration 23) just after each segment boundary, on this
        connection: the segment that has just closed goes as soon as its claims are done, so a
        claim walks the dead entries of about one period of churn, whatever snapshot is held
        elsewhere. One caller at a time rotates, the others return at once. A failure is logged and
        tried again at the next boundary: the claim is only slower meanwhile."""
        added = self._holdings.added
        if added == self._added_at_rotation and not len(self._holdings):
            return
        self._added_at_rotation = added
        try:
            self._queue.rotate_ready(conn=self._connection())
        except (psycopg.Error, PgworkError) as exc:  # a role not granted it yet included
            log.warning("ready ring rotation failed (%s)", str(exc).strip().splitlines()[0])

    def beat(self) -> None:
        # Finishing jobs are renewed too: their outcome may wait for a batched write (or for the
        # database to come back). Their row may be changing state, so a "lost" answer for them is
        # not acted on: the write itself says whether the token still held the job.
        held = [h for h in self._holdings.snapshot() if h.state in _RENEWED and not h.job.lease_lost]
        # Progress reported since the last round rides on this renewal (no statement of its own).
        progress = {h.claimed.id: p for h in held if (p := h.job.take_progress()) is not None}
        # An idle worker sends nothing: its worker lease lapses, and the next job's first renewal
        # renews it again (and adopts that job). Nor does it keep its session connection open:
        # an idle fleet holds one connection per worker less (pgwork.budget).
        if not held:
            self._close()
            self.rounds += 1
            self._metrics.heartbeat_ok()  # nothing to renew is a round that went well
            return
        if self._worker is None:
            self.register()
        worker = self._worker
        sent = time.monotonic()
        try:
            renewal = self._send([h.lease for h in held], worker, progress)
        except (*TRANSIENT, PgworkError) as exc:
            for h in held:
                if h.claimed.id in progress:
                    h.job.untake_progress(progress[h.claimed.id])
            self._close()
            log.warning("heartbeat failed (%s); will retry in %gs", str(exc).strip().splitlines()[0], self.interval)
            now = time.monotonic()
            for h in held:
                if now >= h.lease_deadline and h.state is not AttemptState.FINISHING:
                    log.warning(
                        "job %s: lease lapsed by our clock without a renewal; treating it as lost", h.claimed.id
                    )
                    h.job.request_stop(StopReason.LEASE_LOST)
            return
        self.rounds += 1
        self._metrics.heartbeat_ok()
        states = renewal.states
        if renewal.registered is False:  # taken over, or deleted by the reaper while unreachable
            log.info("worker lease of %s is no longer this worker's; registering again", self._owner)
            self._worker = None
            self.register()
        for h in held:
            if h.state not in _RENEWED:
                continue  # released while the renewal was in flight
            state = states.get(h.claimed.id, LeaseState.LOST)
            if h.state is AttemptState.FINISHING:
                if state is not LeaseState.LOST:
                    h.lease_deadline = sent + self.lease
                continue
            if state is LeaseState.HELD:
                h.lease_deadline = sent + self.lease
            elif state is LeaseState.CANCEL_REQUESTED:
                h.lease_deadline = sent + self.lease
                if not h.job.cancelled:
                    log.info("job %s: cancellation requested; telling the handler", h.claimed.id)
                h.job.request_stop(StopReason.CANCELLED)
            else:
                log.warning("job %s: lease lost (renewal matched no row); its effect will not be written", h.claimed.id)
                h.job.request_stop(StopReason.LEASE_LOST)
