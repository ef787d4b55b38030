"""Experiment 7: the worker drain. Real `pgwork worker --burst` processes drain trivial jobs at
--batch 1/10/100, side by side in the same run with the Queue API loop at the same batch (one
claimer process: claim N, then one `succeed` for batch 1 or one `succeed_many` for the batch).

Rounds are interleaved (worker, API loop, worker, ...) so drift on a shared machine hits both
alike; each figure is the median over rounds. The rate is read from the rows (first claim to
last completion). Every run must leave every job succeeded once with one result and
attempt_count 1 (the --quick mode asserts only that).

Equal footing: before each side's turn (every side, every round) its database's jobs tables are
emptied (TRUNCATE) and the whole database is VACUUMed, catalogs included (`level`). Without it the
worker under test drained on the lab database after the API loop, the bare loop and pgqueuer had
left dead tuples there (pgwork.ready's partitions, which the TRUNCATE does not reach, and the
catalogs; autovacuum is off on the local server), while the baseline worker drained on a database
of its own that only it churned.

With PGWORK_LAB_BASELINE=DIR (a pgwork checkout, e.g. the main branch) the same drains also
run that checkout's worker, on a database of its own migrated by that checkout, in the same
rounds (first in every other round, so neither worker always follows the same drains): a
before/after in one run. With pgqueuer installed (`pip install 'pgwork[peers]'`) it
drains the same jobs at the same batch in one process of its own, in the same rounds, through
asyncpg (its default and recommended driver); at batch 100 also through its psycopg driver, as a
labelled second row. pgqueuer deletes finished rows, so it is timed from its log table's server
stamps: first pick to last success, the same span as pgwork's rows give. At batch 1 the
reference design's bare loop (its SKIP LOCKED claim, then an unfenced completion, one autocommit
connection, with the pending-jobs index it claims through) runs in the same rounds too: issue 13's
target is the one-job worker at >= 80% of it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from pgwork.db import Queue
from pgwork.dsn import with_dbname
from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet, worker_env
from pgwork.tools.lab import NOOP_JOB_TYPE, query
from pgwork.tools.lab.claimers import BARE, ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import LabDatabase, RunSummary
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.wake import memory_kib
from pgwork.tools.lab.workers_table import paired, table

NAME = "worker-drain"
APP = "pgwork.tools.lab.noop_app"
BASELINE_ENV = "PGWORK_LAB_BASELINE"
API = "Queue API loop"
WORKER = "pgwork worker"
BASELINE = "pgwork worker (baseline)"
PEER = "pgqueuer"  # through asyncpg, its recommended driver
PEER_PSYCOPG = "pgqueuer (psycopg driver)"
BARE_LOOP = "bare claim loop (reference)"


@dataclass(frozen=True)
class Case:
    batch: int
    concurrency: int
    jobs: int

    @property
    def x(self) -> str:
        return f"batch {self.batch}"


@dataclass(frozen=True)
class Plan:
    cases: tuple[Case, ...]
    rounds: int


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((Case(1, 1, 200), Case(10, 10, 500), Case(100, 16, 1000)), rounds=1)
    # 3,000 at batch 1 (1,000 before 2026-12-05): a drain of about a second read 0.59-0.86x the
    # bare loop across five rounds of one run; three times as long evens out the host's spells.
    # 30,000 at batch 100 (10,000 until run 20261205T193504Z) for the same reason: at 12,000-16,000
    # jobs/s a 10,000-job drain lasts 0.7 s, and in that run the ratio of two workers differing
    # only in how job lines are written (PGWORK_LAB_BASELINE) spread 0.77-1.06x over five rounds.
    return Plan((Case(1, 1, 3000), Case(10, 10, 10_000), Case(100, 16, 30_000)), rounds=5)


@dataclass
class Rates:
    rates: list[float] = field(default_factory=list)
    peak_kib: list[int] = field(default_factory=list)


class Baseline:
    """Another checkout's worker on a database of its own (its schema may be older than ours)."""

    def __init__(
        self,
        lab: LabDatabase,
        source: str,
        logs: Path,
        *,
        app: str = APP,
        options: tuple[str, ...] = ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"),
    ) -> None:
        self._name = f"{lab.name}_baseline"
        self.dsn = with_dbname(lab.admin_dsn, self._name)
        self._admin = lab.admin_dsn
        self._drop()
        with psycopg.connect(self._admin, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self._name)))
        self.fleet = WorkerFleet(self.dsn, app, logs, options)
        # Its own code first on the path: PACKAGE_ROOT (ours) would win otherwise.
        self.fleet.env = worker_env(self.dsn)
        self.fleet.env["PYTHONPATH"] = os.pathsep.join([source, self.fleet.env["PYTHONPATH"]])
        subprocess.run(
            [*self.fleet.command("migrate")[:3], "migrate"], env=self.fleet.env, check=True, capture_output=True
        )
        self.queue = Queue(self.dsn, check=False, pool_size=1)

    def _drop(self) -> None:
        with psycopg.connect(self._admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self._name)))

    def summary(self) -> RunSummary:
        with psycopg.connect(self.dsn) as conn:
            r = conn.execute(query("run_summary")).fetchone()
        assert r is not None
        return RunSummary(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5] or 0.0), int(r[6]))

    def reset(self) -> None:
        """The same footing as the lab's database gets from `level`: emptied, then VACUUMed whole."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(query("reset"))
            conn.execute(query("vacuum_database"))

    def analyze(self) -> None:
        with psycopg.connect(self.dsn) as conn:
            conn.execute(query("analyze"))

    def close(self) -> None:
        self.fleet.stop_all()
        self.queue.close()
        self._drop()


def level(lab: LabDatabase) -> None:
    """Each side starts its turn on equal footing: jobs tables empty, the whole database VACUUMed."""
    lab.reset()


def _drain_with_worker(
    fleet: WorkerFleet, queue: Queue, case: Case, *, name: str, reset: Callable[[], None], analyze: Callable[[], None]
) -> int:
    """Peak RSS (KiB) of one burst worker draining the case's jobs."""
    reset()
    queue.enqueue_many([NewJob(NOOP_JOB_TYPE, {"n": n}) for n in range(case.jobs)])
    analyze()  # as the API loop's queue is (LabDatabase.enqueue): both claim with fresh statistics
    worker = fleet.start(name, "--burst", "--batch", str(case.batch), "--concurrency", str(case.concurrency))
    peak = 0
    deadline = time.monotonic() + case.jobs / 50 + 120
    while worker.alive():
        peak = max(peak, memory_kib(worker.pid, "VmHWM"))
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker-drain: {name} did not finish {case.jobs} jobs; see {fleet.log_dir}")
        time.sleep(0.05)
    return peak


def _drain_baseline(
    baseline: Baseline, case: Case, n: int, figures: dict[tuple[str, str], Rates], violations: list[str]
) -> float:
    peak = _drain_with_worker(
        baseline.fleet,
        baseline.queue,
        case,
        name=f"b-{case.batch}-{n}",
        reset=baseline.reset,
        analyze=baseline.analyze,
    )
    before = _check(BASELINE, case, baseline.summary(), violations)
    figures.setdefault((BASELINE, case.x), Rates()).rates.append(before)
    figures[(BASELINE, case.x)].peak_kib.append(peak)
    return before


def _drain_with_api(lab: LabDatabase, case: Case) -> int:
    level(lab)
    lab.enqueue(case.jobs)
    finish = "many" if case.batch > 1 else "each"
    spec = ClaimerSpec(lab.dsn, "api-loop", "skiplocked", 0.0, case.jobs / 50 + 120, batch=case.batch, finish=finish)
    reports = ClaimerFleet([spec]).wait()
    return sum(r.not_created for r in reports)


def _drain_with_bare_loop(lab: LabDatabase, case: Case) -> None:
    """The reference design claims through its own index of pending jobs. pgwork's schema dropped
    that index at version 24 (its claim reads the ready ring), after which the bare loop's claim
    was a sequential scan and sort of the whole table, every claim slower than the last: made for
    the bare loop's turn alone (that one index: its claim takes any type, so it maintains no
    second), and no other side's writes maintain it."""
    level(lab)
    lab.run("reference_claim_index")
    try:
        lab.enqueue(case.jobs)
        ClaimerFleet([ClaimerSpec(lab.dsn, "bare-loop", BARE, 0.0, case.jobs / 50 + 120)]).wait()
    finally:
        lab.run("drop_old_claim_indexes")


def _drain_with_pgqueuer(
    lab: LabDatabase, case: Case, violations: list[str], dsn: str | None = None, driver: str = "asyncpg"
) -> float:
    """pgqueuer draining the case's jobs on `dsn` (default the lab's) through `driver`: jobs/s."""
    level(lab)  # it empties its own tables itself; the VACUUM clears what the previous drains left
    env = worker_env(dsn or lab.dsn)
    command = [sys.executable, "-m", "pgwork.tools.lab.pgqueuer_drain", str(case.jobs), str(case.batch), driver]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=case.jobs / 50 + 120, check=False)
    if done.returncode != 0:
        violations.append(f"worker-drain {PEER} {case.x}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
        return float("nan")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["done"] != case.jobs or figures["logged"] != case.jobs or figures["left"] != 0:
        violations.append(
            f"worker-drain {PEER} ({driver}) {case.x}: {figures['done']}/{case.jobs} done, "
            f"{figures['logged']} logged, {figures['left']} left"
        )
    return float(case.jobs / figures["seconds"]) if figures["seconds"] > 0 else float("nan")


def _check(series: str, case: Case, s: RunSummary, violations: list[str]) -> float:
    if s.succeeded != case.jobs or s.results != case.jobs or s.inflated or s.attempts != case.jobs:
        violations.append(
            f"worker-drain {series} {case.x}: {s.succeeded}/{case.jobs} succeeded, {s.results} results, "
            f"{s.attempts} claims, {s.inflated} inflated"
        )
    return case.jobs / s.seconds if s.seconds > 0 else float("nan")


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    violations: list[str] = []
    figures: dict[tuple[str, str], Rates] = {}
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-workers-"))
    fleet = WorkerFleet(lab.dsn, APP, logs, ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"))
    source = os.environ.get(BASELINE_ENV)
    baseline = Baseline(lab, source, logs / "baseline") if source else None
    peer = importlib.util.find_spec("pgqueuer") is not None
    if not peer:
        say("  pgqueuer is not installed (pip install 'pgwork[peers]'): no peer series")
    runs = 0
    load: list[float] = [os.getloadavg()[0]]
    try:
        for n in range(p.rounds):
            for case in p.cases:
                # Every other round the baseline drains first: whatever the previous drains leave
                # the server doing (autovacuum, a checkpoint) then falls on each worker alike.
                before = (
                    _drain_baseline(baseline, case, n, figures, violations)
                    if baseline is not None and n % 2 == 1
                    else None
                )
                peak = _drain_with_worker(
                    fleet, lab.queue, case, name=f"w-{case.batch}-{n}", reset=lambda: level(lab), analyze=lab.analyze
                )
                rate = _check(WORKER, case, lab.summary(), violations)
                figures.setdefault((WORKER, case.x), Rates()).rates.append(rate)
                figures[(WORKER, case.x)].peak_kib.append(peak)
                if _drain_with_api(lab, case):
                    violations.append(f"worker-drain {API} {case.x}: a fenced completion did not write its result")
                api = _check(API, case, lab.summary(), violations)
                figures.setdefault((API, case.x), Rates()).rates.append(api)
                line = f"  round {n + 1} {case.x:<9} worker {rate:7.0f} jobs/s, API loop {api:7.0f} jobs/s"
                if case.batch == 1:
                    _drain_with_bare_loop(lab, case)
                    bare = _check(BARE_LOOP, case, lab.summary(), violations)
                    figures.setdefault((BARE_LOOP, case.x), Rates()).rates.append(bare)
                    line += f", bare loop {bare:7.0f} jobs/s"
                if baseline is not None:
                    if before is None:
                        before = _drain_baseline(baseline, case, n, figures, violations)
                    line += f", baseline worker {before:7.0f} jobs/s"
                if peer:
                    theirs = _drain_with_pgqueuer(lab, case, violations)
                    figures.setdefault((PEER, case.x), Rates()).rates.append(theirs)
                    line += f", pgqueuer {theirs:7.0f} jobs/s"
                    if case.batch == 100:
                        second = _drain_with_pgqueuer(lab, case, violations, driver="psycopg")
                        figures.setdefault((PEER_PSYCOPG, case.x), Rates()).rates.append(second)
                        line += f", pgqueuer (psycopg) {second:7.0f} jobs/s"
                load.append(os.getloadavg()[0])
                say(line)
                runs += 1
        for line in summary(figures, p.rounds, load):
            say(f"  {line}")
        rss = idle_rss(fleet, lab.queue)
        say(f"  idle worker RSS {rss / 1024:.1f} MiB")
    except Exception:
        say(f"  worker-drain failed; worker logs kept in {logs}")
        raise
    else:
        shutil.rmtree(logs, ignore_errors=True)
    finally:
        fleet.stop_all()
        if baseline is not None:
            baseline.close()
    return Outcome(_measurements(p, figures, rss), violations, runs)


def summary(figures: dict[tuple[str, str], Rates], rounds: int, load: list[float]) -> list[str]:
    """The issue-28 table: the worker beside pgqueuer (asyncpg), its API loop and the bare loop."""
    try:
        version = importlib.metadata.version("pgqueuer")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    return table(
        {k: v.rates for k, v in figures.items()},
        worker=WORKER,
        api=API,
        bare=BARE_LOOP,
        peer=PEER,
        peer_psycopg=PEER_PSYCOPG,
        peer_version=version,
        rounds=rounds,
        load=f"1-min {min(load):.1f}-{max(load):.1f} (2 cores, shared)",
    )


def idle_rss(fleet: WorkerFleet, queue: Queue) -> int:
    """VmRSS (KiB) of a worker that has taken one job and waits for more."""
    worker = fleet.start("idle", "--poll", "5m")
    job_id = queue.enqueue(NOOP_JOB_TYPE, {"idle": True})
    deadline = time.monotonic() + 60
    while (row := queue.job(job_id)) is None or row.status != "succeeded":
        if time.monotonic() > deadline:
            raise TimeoutError("worker-drain: the idle worker took no job in 60s")
        time.sleep(0.02)
    time.sleep(1.0)  # settled: its threads started, its first write done
    rss = memory_kib(worker.pid, "VmRSS")
    fleet.stop_all()
    return rss


def _measurements(p: Plan, figures: dict[tuple[str, str], Rates], rss: int) -> list[Measurement]:
    out: list[Measurement] = []
    for case in p.cases:
        api = figures.get((API, case.x))
        bare = figures.get((BARE_LOOP, case.x))
        for series in (WORKER, BASELINE, API, BARE_LOOP, PEER, PEER_PSYCOPG):
            f = figures.get((series, case.x))
            if f is None:
                continue
            rate = statistics.median(f.rates)
            out += [
                Measurement(NAME, series, case.x, "jobs", case.jobs),
                Measurement(NAME, series, case.x, "options", _options(series, case)),
                Measurement(NAME, series, case.x, "jobs/s", rate, "jobs/s"),
                Measurement(NAME, series, case.x, "jobs/s min", min(f.rates), "jobs/s"),
                Measurement(NAME, series, case.x, "jobs/s max", max(f.rates), "jobs/s"),
            ]
            if api is not None and series != API:
                out.append(Measurement(NAME, series, case.x, "vs API loop", rate / statistics.median(api.rates), "x"))
            if bare is not None and series != BARE_LOOP:
                ratios = paired(f.rates, bare.rates)
                out += [
                    Measurement(NAME, series, case.x, "vs bare loop", statistics.median(ratios), "x"),
                    Measurement(NAME, series, case.x, "vs bare loop min", min(ratios), "x"),
                    Measurement(NAME, series, case.x, "vs bare loop max", max(ratios), "x"),
                ]
            peer = figures.get((PEER, case.x))
            if peer is not None and series not in (PEER, PEER_PSYCOPG):
                ratios = paired(f.rates, peer.rates)
                out += [
                    Measurement(NAME, series, case.x, "vs pgqueuer", statistics.median(ratios), "x"),
                    Measurement(NAME, series, case.x, "vs pgqueuer min", min(ratios), "x"),
                    Measurement(NAME, series, case.x, "vs pgqueuer max", max(ratios), "x"),
                ]
            if f.peak_kib:
                out.append(Measurement(NAME, series, case.x, "peak RSS", max(f.peak_kib) / 1024, "MiB"))
    out.append(Measurement(NAME, WORKER, "idle", "RSS idle", rss / 1024, "MiB"))
    return out


def _options(series: str, case: Case) -> str:
    if series == BARE_LOOP:
        return "SKIP LOCKED claim + unfenced complete, one connection"
    if series == API:
        return "claim + succeed" if case.batch == 1 else "claim + succeed_many"
    if series == PEER:
        return f"asyncpg, batch_size={case.batch}, drain mode"
    if series == PEER_PSYCOPG:
        return f"psycopg driver, batch_size={case.batch}, drain mode"
    return f"--batch {case.batch} --concurrency {case.concurrency}"
