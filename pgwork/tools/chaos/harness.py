"""The chaos run: M jobs, N `pgwork worker` processes, a seeded injector, then the invariants.

It owns a private PostgreSQL server (pgwork.tools.chaos.server) because it restarts it; it never
touches any other server. Workers connect as a least-privilege role made with `pgwork grant
--profile worker`, over TCP with a password, so the run also shows that password never reaches
their logs. The reaper runs in the harness, as the reaper CronJob would, under a reaper-profile role.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as psycopg_sql
from psycopg.rows import dict_row

from pgwork.db import Queue, grant, migrate
from pgwork.errors import PgworkError
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tables import render
from pgwork.tools.chaos import SQL, invariants, schedule, server, workload
from pgwork.tools.chaos.schedule import Fault, FaultKind
from pgwork.tools.fleet import WorkerFleet

log = logging.getLogger("pgwork.tools.chaos")

WORKER_ROLE = "pgwork_chaos_worker"
REAPER_ROLE = "pgwork_chaos_reaper"  # the reaper profile: reap only, as the CronJob's own role


@dataclass(frozen=True)
class Config:
    jobs: int = 2000
    workers: int = 6
    seed: int = 7
    duration: float = 45.0  # the injector's window; jobs become ready over most of it
    concurrency: int = 4
    batch: int = 2
    lease: float = 3.0
    heartbeat: float = 1.0
    reap_every: float = 0.5
    faults_per_minute: float = 24.0
    settle: float = 60.0  # after the window: how long to wait for the last jobs to finish

    def check(self) -> None:
        problems = []
        if not 1 <= self.jobs <= 1_000_000:
            problems.append("--jobs: use 1..1000000")
        if not 1 <= self.workers <= 64:
            problems.append("--workers: use 1..64")
        if self.duration <= 0:
            problems.append("--duration: must be > 0")
        if self.lease < 1 or self.heartbeat <= 0 or self.heartbeat > self.lease / 3:
            problems.append("--lease/--heartbeat: lease >= 1s and 0 < heartbeat <= lease/3")
        if self.faults_per_minute <= 0:
            problems.append("--faults-per-minute: must be > 0")
        if problems:
            raise PgworkError("; ".join(problems))


@dataclass
class Slot:
    index: int
    generation: int = 0

    @property
    def owner(self) -> str:
        return f"chaos-s{self.index}-g{self.generation}"


@dataclass(frozen=True)
class Paused:
    resume_at: float  # seconds on the run's clock
    process: subprocess.Popen[bytes]
    owner: str
    since: float  # wall clock


@dataclass
class FaultRecord:
    kind: FaultKind
    target: str | None
    started_at: float  # wall clock, seconds since the epoch
    ended_at: float


@dataclass
class Report:
    config: Config
    figures: invariants.InvariantCounts
    faults: Counter[FaultKind]
    worker_crashes: int
    password_leaks: int
    reaper_errors: int
    processes: int
    seconds: float
    violations: list[str]
    log_dir: Path

    @property
    def ok(self) -> bool:
        return not self.violations

    def rows(self) -> list[dict[str, Any]]:
        f = self.figures
        pairs: list[tuple[str, Any]] = [
            ("jobs enqueued", self.config.jobs),
            ("workers (slots)", self.config.workers),
            ("worker processes started", self.processes),
            ("seed", self.config.seed),
            ("wall time (s)", round(self.seconds, 1)),
            ("succeeded", f.succeeded),
            ("dead", f.dead),
            ("claims (logged)", f.claims),
            ("leases reclaimed by the reaper", f.reclaims),
            ("  of them from paused workers", f.reclaimed_from_paused),
            ("completions after expiry, before reclaim", f.late_completions),
        ]
        pairs += [(f"faults: {k.value}", self.faults.get(k, 0)) for k in schedule.KINDS]
        pairs += [
            ("lost", invariants.lost_jobs(f, self.config.jobs)),
            ("stuck (not succeeded/dead)", f.stuck),
            ("duplicate results / successes", f.duplicate_results + f.duplicate_successes),
            ("writes by stale owners", f.stale_owner_writes),
            ("attempt_count != claims", f.attempt_mismatches),
            ("stolen leases", f.stolen_leases),
            ("worker crashes", self.worker_crashes),
            ("password in logs", self.password_leaks),
            ("reaper rounds that failed (db down)", self.reaper_errors),
        ]
        return invariants.as_rows(pairs)

    def render(self) -> str:
        verdict = "all invariants held" if self.ok else "VIOLATED:\n  " + "\n  ".join(self.violations)
        return f"{render(self.rows())}\n\n{verdict}"


class Run:
    def __init__(self, config: Config, srv: server.PrivateServer) -> None:
        self.config = config
        self.server = srv
        self.admin_dsn = srv.dsn("chaos")
        self.worker_password = secrets.token_urlsafe(18)
        self.worker_url = srv.url("chaos", user=WORKER_ROLE, password=self.worker_password)
        self.log_dir = srv.base / "logs"
        self.slots = [Slot(i) for i in range(config.workers)]
        self.records: list[FaultRecord] = []
        self.crashes = 0
        c = config
        options = ["--concurrency", str(c.concurrency), "--batch", str(c.batch), "--lease", f"{c.lease}s"]
        options += ["--heartbeat", f"{c.heartbeat}s", "--poll", "0.25s", "--grace", "5s"]
        self.fleet = WorkerFleet(self.worker_url, "pgwork.tools.chaos.app", self.log_dir, options, isolated=True)
        self._admin: psycopg.Connection[dict[str, Any]] | None = None

    # -- setup ----------------------------------------------------------------------------

    def prepare(self) -> None:
        with psycopg.connect(self.server.dsn("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE chaos ENCODING 'UTF8' TEMPLATE template0")
        migrate(self.admin_dsn)
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(SQL.query("install"))
            for role in (WORKER_ROLE, REAPER_ROLE):
                conn.execute(
                    psycopg_sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        psycopg_sql.Identifier(role), psycopg_sql.Literal(self.worker_password)
                    )
                )
        grant(self.admin_dsn, WORKER_ROLE, "worker")
        grant(self.admin_dsn, REAPER_ROLE, "reaper")
        jobs = workload.jobs(
            self.config.seed, self.config.jobs, spread=self.config.duration * 0.8, lease=self.config.lease
        )
        with Queue(self.admin_dsn, pool_size=1) as q:
            for start in range(0, len(jobs), 5000):
                q.enqueue_many(jobs[start : start + 5000])
        self.log_dir.mkdir(exist_ok=True)

    def start_worker(self, slot: Slot) -> None:
        slot.generation += 1
        self.fleet.start(slot.owner)

    def process(self, slot: Slot) -> subprocess.Popen[bytes]:
        return self.fleet[slot.owner].process

    # -- faults ---------------------------------------------------------------------------

    def inject(self, fault: Fault, resumes: list[Paused], clock: float) -> None:
        slot = self.slots[fault.slot]
        started = time.time()
        if fault.kind is FaultKind.KILL_WORKER:
            victim = slot.owner
            self.fleet.kill(victim)
            self.records.append(FaultRecord(fault.kind, victim, started, time.time()))
            self.start_worker(slot)
            log.info("%6.1fs SIGKILL %s; started %s", clock, victim, slot.owner)
        elif fault.kind in (FaultKind.RESTART_DB, FaultKind.CRASH_DB):
            mode = "fast" if fault.kind is FaultKind.RESTART_DB else "immediate"
            self.server.restart(mode)
            self.records.append(FaultRecord(fault.kind, None, started, time.time()))
            log.info("%6.1fs restarted PostgreSQL -m %s (%.1fs)", clock, mode, time.time() - started)
        elif fault.kind is FaultKind.TERMINATE_BACKENDS:
            killed = self._terminate(slot.owner)
            if killed is None:
                log.info("%6.1fs pg_terminate_backend on %s: database unreachable, skipped", clock, slot.owner)
                return
            self.records.append(FaultRecord(fault.kind, slot.owner, started, time.time()))
            log.info("%6.1fs pg_terminate_backend on %s: %s sessions", clock, slot.owner, killed)
        elif fault.kind is FaultKind.PAUSE_WORKER:
            # Stop it while it holds work, or the pause proves nothing about stale writes.
            self._wait_until_busy(slot.owner, patience=5.0)
            process = self.process(slot)
            paused = Paused(clock + (time.time() - started) + fault.hold, process, slot.owner, time.time())
            process.send_signal(signal.SIGSTOP)
            resumes.append(paused)
            log.info("%6.1fs SIGSTOP %s for %.1fs", clock, slot.owner, fault.hold)

    def resume(self, paused: Paused, clock: float) -> None:
        paused.process.send_signal(signal.SIGCONT)
        self.records.append(FaultRecord(FaultKind.PAUSE_WORKER, paused.owner, paused.since, time.time()))
        log.info("%6.1fs SIGCONT %s", clock, paused.owner)

    def _admin_row(self, name: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """One row from a harness query on a fresh superuser connection; None while the database is down."""
        # Twice: the kept connection goes stale whenever the server restarts.
        for _ in range(2):
            try:
                if self._admin is None or self._admin.closed:
                    self._admin = psycopg.connect(
                        self.admin_dsn, autocommit=True, connect_timeout=5, row_factory=dict_row
                    )
                return self._admin.execute(SQL.query(name), params or {}).fetchone()
            except psycopg.Error as exc:
                log.debug("%s failed: %s", name, exc)
                if self._admin is not None:
                    with contextlib.suppress(psycopg.Error):
                        self._admin.close()
                self._admin = None
        return None

    def _terminate(self, owner: str) -> int | None:
        row = self._admin_row("terminate_backends", {"app": f"pgwork-worker:{owner}"})
        return int(row["terminated"]) if row else None

    def _wait_until_busy(self, owner: str, patience: float) -> None:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            row = self._admin_row("held_by", {"owner": owner})
            if row and int(row["held"]) > 0:
                return
            time.sleep(0.05)

    def _unfinished(self) -> int | None:
        row = self._admin_row("unfinished")
        return int(row["unfinished"]) if row else None

    def watch_workers(self, clock: float) -> None:
        """A worker that exited on its own is a crash; replace it, as a Deployment would."""
        for slot in self.slots:
            worker = self.fleet[slot.owner]
            if not worker.alive():
                self.crashes += 1
                log.warning("%6.1fs %s exited by itself (code %s)", clock, slot.owner, worker.process.returncode)
                self.start_worker(slot)

    # -- the run --------------------------------------------------------------------------

    def execute(self) -> Report:
        c = self.config
        plan = schedule.plan(
            c.seed,
            duration=c.duration,
            workers=c.workers,
            lease=c.lease,
            reap_every=c.reap_every,
            faults_per_minute=c.faults_per_minute,
        )
        self.prepare()
        reaper_dsn = self.server.dsn("chaos", user=REAPER_ROLE, password=self.worker_password)
        # Reclaims lapsed leases every `reap_every` seconds, outliving restarts (as the CronJob would).
        reaper = Reaper(
            lambda: Queue(reaper_dsn, pool_size=1, application_name=invariants.REAPER_APP),
            ReaperConfig(every=c.reap_every, loop_for=None),
            on_error=lambda exc: log.debug("reap failed: %s", exc),
        )
        stop_reaper = threading.Event()
        reaper_thread = threading.Thread(
            target=reaper.loop, args=(stop_reaper,), name="pgwork-chaos-reaper", daemon=True
        )
        began = time.monotonic()
        for slot in self.slots:
            self.start_worker(slot)
        reaper_thread.start()
        pending = list(plan)
        resumes: list[Paused] = []
        last_check = 0.0
        try:
            while True:
                clock = time.monotonic() - began
                for paused in [p for p in resumes if p.resume_at <= clock]:
                    resumes.remove(paused)
                    self.resume(paused, clock)
                while pending and pending[0].at <= clock:
                    self.inject(pending.pop(0), resumes, clock)
                self.watch_workers(clock)
                if clock >= c.duration and not pending and not resumes and clock - last_check >= 0.5:
                    last_check = clock
                    left = self._unfinished()
                    if left == 0:
                        break
                    if clock > c.duration + c.settle:
                        log.warning("%d jobs unfinished %gs after the window; stopping", left or -1, c.settle)
                        break
                time.sleep(0.05)
        finally:
            for paused in resumes:
                self.resume(paused, time.monotonic() - began)
            self.wind_down(stop_reaper, reaper_thread, reaper)
        self.final_reap()
        seconds = time.monotonic() - began
        return self.judge(reaper, seconds)

    def wind_down(self, stop_reaper: threading.Event, reaper_thread: threading.Thread, reaper: Reaper) -> None:
        """Workers stopped (they drain), the reaper thread stopped, the harness's connection closed."""
        self.fleet.stop_all()
        stop_reaper.set()
        reaper_thread.join(timeout=30)
        reaper.close()
        if self._admin is not None:
            self._admin.close()

    def final_reap(self) -> None:
        """Whatever still runs now belongs to no live worker: wait out its lease and reap it."""
        with Queue(self.admin_dsn, pool_size=1, application_name=invariants.REAPER_APP) as q:
            if q.running():
                time.sleep(self.config.lease + 0.5)
            q.reap()

    def judge(self, reaper: Reaper, seconds: float) -> Report:
        with psycopg.connect(self.admin_dsn, autocommit=True, row_factory=dict_row) as conn:
            for r in self.records:
                conn.execute(
                    SQL.query("record_fault"),
                    {"kind": r.kind.value, "target": r.target, "started_at": r.started_at, "ended_at": r.ended_at},
                )
            figures = invariants.read(conn)
        leaks = self.password_leaks()
        faults: Counter[FaultKind] = Counter()
        for r in self.records:
            faults[r.kind] += 1
        return Report(
            self.config,
            figures,
            faults,
            self.crashes,
            leaks,
            reaper.errors,
            sum(slot.generation for slot in self.slots),
            seconds,
            invariants.violations(
                figures, expected_jobs=self.config.jobs, worker_crashes=self.crashes, password_leaks=leaks
            ),
            self.log_dir,
        )

    def password_leaks(self) -> int:
        secrets_ = (self.worker_password.encode(), self.server.password.encode())
        return sum(1 for p in self.log_dir.glob("*.log") if any(s in p.read_bytes() for s in secrets_))


def run(config: Config, *, keep: bool = False) -> Report:
    """Start a private server, run the chaos, judge it, and (unless `keep`) delete everything."""
    config.check()
    srv = server.create()
    try:
        report = Run(config, srv).execute()
    except BaseException:
        log.error("chaos run failed; server files and worker logs kept in %s", srv.base)
        srv.stop()
        raise
    if keep or not report.ok:
        srv.stop()
        log.info("worker logs kept in %s", report.log_dir)
    else:
        srv.remove()
    return report
