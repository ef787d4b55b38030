"""Worker processes for the lab: each runs one claim strategy on its own connection.

Processes, not threads: on this 2-core machine a client's Python time would otherwise be
measured as claim latency by every other thread waiting on the GIL. Work is `time.sleep`, as in
the reference. Every worker connects first, then all start together on one signal, so
connection set-up never lands inside a measured run; the run's timing is read from the
database afterwards (first claim to last completion).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue as queue_mod
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

from pgwork.db import AnyConnection, Queue, connect
from pgwork.models import Completion
from pgwork.tools.lab import query

STRATEGIES = ("naive", "blocking", "skiplocked", "held", "advisory")
# The reference design's bare loop: its SKIP LOCKED claim, then an unfenced `complete`, on one
# autocommit connection (no lease token, no Queue). Not among STRATEGIES: the claims experiment
# compares those; the worker drain measures the worker against this one.
BARE = "bare"
FINISHES = ("each", "many")
JOB_TYPE = "lab"
APP_PREFIX = "pgwork-lab-worker"
# How many candidates an advisory-lock claimer tries before polling again.
ADVISORY_CANDIDATES = 16
START_TIMEOUT = 120.0


class LabError(RuntimeError):
    """A lab run could not be carried out (a worker failed, a deadline passed)."""


@dataclass(frozen=True)
class ClaimerSpec:
    dsn: str
    name: str
    strategy: str
    job_seconds: float
    deadline_seconds: float
    batch: int = 1
    finish: str = "each"
    # Job lengths drawn uniformly from job_seconds * (1 +- jitter): workers stop waking in step.
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be within [0, 1), got {self.jitter}")
        if self.strategy not in (*STRATEGIES, BARE):
            raise ValueError(f"strategy must be one of {(*STRATEGIES, BARE)}, got {self.strategy!r}")
        if self.finish not in FINISHES:
            raise ValueError(f"finish must be one of {FINISHES}, got {self.finish!r}")
        if self.batch != 1 and self.strategy != "skiplocked":
            raise ValueError("only the skiplocked strategy claims in batches")


@dataclass
class WorkerReport:
    name: str
    executed: list[int] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)  # claims that returned work
    claim_seconds: float = 0.0  # all claim calls, empty ones included
    finish_seconds: float = 0.0
    empty_claims: int = 0
    lost_races: int = 0  # advisory: locked a candidate someone had already finished
    not_created: int = 0  # pgwork completions that did not write the result (must stay 0)
    unanswered_seconds: float = 0.0  # empty claim calls since the last claim that got a job
    error: str | None = None


@dataclass(frozen=True)
class Start:
    """Workers announce they are connected, then wait for the parent's go."""

    name: str
    announced: Any  # multiprocessing queue of names
    go: Event

    def wait(self) -> None:
        self.announced.put(self.name)
        if not self.go.wait(timeout=START_TIMEOUT):
            raise LabError("no start signal")


def _claimed(report: WorkerReport, ids: list[int], t0: float) -> list[int]:
    """Book a claim call that started at t0.

    Claim latency is the time to get a job: calls that came back empty while jobs were still
    pending (a blocking claimer that waited on a lock and lost) count toward the next claim
    that gets one. Empty calls at the end, when the queue is drained, count toward none.
    """
    elapsed = time.perf_counter() - t0
    report.claim_seconds += elapsed
    if ids:
        report.claim_ms.append((report.unanswered_seconds + elapsed) * 1000)
        report.unanswered_seconds = 0.0
    else:
        report.empty_claims += 1
        report.unanswered_seconds += elapsed
    return ids


def _work(spec: ClaimerSpec, rng: random.Random) -> None:
    seconds = spec.job_seconds * (1 + rng.uniform(-spec.jitter, spec.jitter)) if spec.jitter else spec.job_seconds
    if seconds > 0:
        time.sleep(seconds)


def _pending(conn: AnyConnection) -> int:
    row = conn.execute(query("pending_left"), {}).fetchone()
    return int(row["pending"]) if row else 0


def _ids(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [int(r["id"]) for r in rows]


def _run_skiplocked(spec: ClaimerSpec, ready: Start, report: WorkerReport) -> None:
    with Queue(spec.dsn, pool_size=1, application_name=f"{APP_PREFIX}-{spec.name}", check=False) as q:
        ready.wait()
        rng = random.Random(spec.name)
        deadline = time.monotonic() + spec.deadline_seconds
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            jobs = q.claim(spec.name, job_types=[JOB_TYPE], limit=spec.batch, lease=60)
            if not _claimed(report, [j.id for j in jobs], t0):
                stats = q.stats([JOB_TYPE])
                if not stats or stats[0].ready == 0:
                    return
                continue
            for job in jobs:
                _work(spec, rng)
                report.executed.append(job.id)
            t0 = time.perf_counter()
            if spec.finish == "many":
                outcomes = list(q.succeed_many([(j.lease, {"ok": True}) for j in jobs]).values())
            else:
                outcomes = [q.succeed(j.lease, {"ok": True}) for j in jobs]
            report.finish_seconds += time.perf_counter() - t0
            report.not_created += sum(1 for o in outcomes if o is not Completion.CREATED)


def _claim_naive(conn: AnyConnection, owner: str) -> list[int]:
    head = conn.execute(query("naive_select"), {}).fetchall()
    if not head:
        return []
    return _ids(conn.execute(query("naive_update"), {"owner": owner, "id": head[0]["id"]}).fetchall())


def _claim_blocking(conn: AnyConnection, owner: str) -> list[int]:
    return _ids(conn.execute(query("blocking_claim"), {"owner": owner}).fetchall())


def _claim_advisory(conn: AnyConnection, owner: str, report: WorkerReport) -> list[int]:
    candidates = _ids(conn.execute(query("advisory_candidates"), {"limit": ADVISORY_CANDIDATES}).fetchall())
    for job_id in candidates:
        locked = conn.execute(query("advisory_try_lock"), {"id": job_id}).fetchone()
        if not locked or not locked["locked"]:
            continue
        if conn.execute(query("advisory_mark"), {"owner": owner, "id": job_id}).fetchall():
            return [job_id]
        # Someone finished it (and unlocked) after our candidate list was read.
        conn.execute(query("advisory_unlock"), {"id": job_id})
        report.lost_races += 1
    return []


def _run_autocommit(spec: ClaimerSpec, ready: Start, report: WorkerReport) -> None:
    conn = connect(spec.dsn, application_name=f"{APP_PREFIX}-{spec.name}")
    try:
        ready.wait()
        rng = random.Random(spec.name)
        deadline = time.monotonic() + spec.deadline_seconds
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            if spec.strategy == "naive":
                ids = _claim_naive(conn, spec.name)
            elif spec.strategy == "blocking":
                ids = _claim_blocking(conn, spec.name)
            elif spec.strategy == BARE:
                ids = _ids(conn.execute(query("skiplocked_claim"), {"owner": spec.name}).fetchall())
            else:
                ids = _claim_advisory(conn, spec.name, report)
            if not _claimed(report, ids, t0):
                if _pending(conn) == 0:
                    return
                continue
            _work(spec, rng)
            report.executed.append(ids[0])
            t0 = time.perf_counter()
            conn.execute(query("complete"), {"owner": spec.name, "id": ids[0]})
            if spec.strategy == "advisory":
                conn.execute(query("advisory_unlock"), {"id": ids[0]})
            report.finish_seconds += time.perf_counter() - t0
    finally:
        conn.close()


def _run_held(spec: ClaimerSpec, ready: Start, report: WorkerReport) -> None:
    """One transaction from claim to completion, open across the work."""
    conn = connect(spec.dsn, autocommit=False, application_name=f"{APP_PREFIX}-{spec.name}")
    owner = {"owner": spec.name}
    try:
        ready.wait()
        rng = random.Random(spec.name)
        deadline = time.monotonic() + spec.deadline_seconds
        while time.monotonic() < deadline:
            finish_started = 0.0
            with conn.transaction():
                t0 = time.perf_counter()
                ids = _claimed(report, _ids(conn.execute(query("skiplocked_claim"), owner).fetchall()), t0)
                if ids:
                    _work(spec, rng)
                    report.executed.append(ids[0])
                    finish_started = time.perf_counter()
                    conn.execute(query("complete"), {**owner, "id": ids[0]})
            if ids:
                # The completion's commit is part of finishing.
                report.finish_seconds += time.perf_counter() - finish_started
                continue
            with conn.transaction():
                left = _pending(conn)
            if left == 0:
                return
    finally:
        conn.close()


def worker_main(spec: ClaimerSpec, ready: Start, out: Any) -> None:
    report = WorkerReport(spec.name)
    try:
        if spec.strategy == "skiplocked":
            _run_skiplocked(spec, ready, report)
        elif spec.strategy == "held":
            _run_held(spec, ready, report)
        else:
            _run_autocommit(spec, ready, report)
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    out.put(report)


class ClaimerFleet:
    """Worker processes started together; `wait` collects their reports."""

    def __init__(self, specs: Sequence[ClaimerSpec]) -> None:
        if not specs:
            raise ValueError("a fleet needs at least one worker")
        ctx = mp.get_context("forkserver")
        announced = ctx.Queue()
        self._go = ctx.Event()
        self._out = ctx.Queue()
        self._procs = [
            ctx.Process(
                target=worker_main, args=(s, Start(s.name, announced, self._go), self._out), name=s.name, daemon=True
            )
            for s in specs
        ]
        self.reports: list[WorkerReport] = []
        self._deadline = max(s.deadline_seconds for s in specs)
        for p in self._procs:
            p.start()
        ready = 0
        end = time.monotonic() + START_TIMEOUT
        while ready < len(specs):
            try:
                announced.get(timeout=0.2)
                ready += 1
            except queue_mod.Empty:
                self._collect(0)
                failed = [f"{r.name}: {r.error}" for r in self.reports if r.error]
                if failed or time.monotonic() > end:
                    self._stop()
                    raise LabError(f"workers failed to start: {failed or 'timed out connecting'}") from None
        self._go.set()

    def _collect(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while len(self.reports) < len(self._procs):
            try:
                self.reports.append(self._out.get(timeout=max(0.01, min(0.2, end - time.monotonic()))))
            except queue_mod.Empty:
                if time.monotonic() >= end:
                    return

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    def done(self) -> bool:
        self._collect(0)
        return len(self.reports) == len(self._procs)

    def _stop(self) -> None:
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(timeout=10)

    def wait(self) -> list[WorkerReport]:
        self._collect(self._deadline + 60)
        missing = len(self._procs) - len(self.reports)
        self._stop()
        if missing:
            raise LabError(f"{missing} worker(s) did not report within {self._deadline + 60:.0f}s")
        errors = [f"{r.name}: {r.error}" for r in self.reports if r.error]
        if errors:
            raise LabError("worker failed: " + "; ".join(errors))
        return self.reports


def preload() -> None:
    """Workers fork from a server that has already imported the lab, so each starts in milliseconds."""
    with contextlib.suppress(ValueError):
        mp.get_context("forkserver").set_forkserver_preload(["pgwork.tools.lab.claimers"])
