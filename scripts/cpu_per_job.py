"""CPU per job, client and server apart: where a trivial job's time goes for pgwork's worker, pgwork's
Queue API loop and pgqueuer (asyncpg), each draining the same jobs at batch 100 (issue 28).

    python scripts/cpu_per_job.py [--jobs 20000] [--rounds 3]

A throughput ratio on this two-core machine mixes the client's CPU with the server's, since both share
the cores. This splits them: the client's CPU is the drain process's own (RUSAGE_CHILDREN around it);
the server's is every process of a PostgreSQL started for this script alone (embedded), read from
/proc before and after the drain: the postmaster's own time plus its reaped children's (cutime and
cstime: backends that exited) plus its live children's. Each side drains on emptied, VACUUMed tables,
sides interleaved, median [min-max] over rounds. CPU time is much less sensitive to other load on the
machine than a rate is; the rate is printed beside it, as noisy as the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgwork.models import Completion, NewJob
from pgwork.tools.fleet import WorkerFleet, worker_env
from pgwork.tools.lab import NOOP_JOB_TYPE
from pgwork.tools.lab.labdb import JOB_TYPE, LabDatabase
from pgwork.tools.lab.pgqueuer_drain import GATE_ENV
from pgwork.tools.lab.proccpu import proc_cpu, server_cpu
from pgwork.tools.lab.workers import APP, level


def client_cpu() -> float:
    """This process's CPU and its reaped children's: the API loop runs here, the others as children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@dataclass
class Drain:
    """One side's drain: `prepare` enqueues (not counted), `run` drains and returns jobs/s, and
    `client_before` is client CPU already spent by a child before the drain began (pgqueuer's enqueue)."""

    prepare: Callable[[int], None]
    run: Callable[[int], float]
    client_before: Callable[[], float] = lambda: 0.0


def measure(postmaster: int, side: Drain, jobs: int) -> tuple[float, float, float]:
    """(client s, server s, jobs/s) of draining `jobs` jobs."""
    side.prepare(jobs)
    client, server = client_cpu(), server_cpu(postmaster)
    rate = side.run(jobs)
    return client_cpu() - client - side.client_before(), server_cpu(postmaster) - server, rate


def rows_rate(lab: LabDatabase) -> float:
    """jobs/s from the rows: first claim to last completion, as the lab's workers experiment reads it."""
    summary = lab.summary()
    if summary.succeeded != summary.jobs:
        raise SystemExit(f"{summary.jobs - summary.succeeded} jobs not succeeded")
    return summary.jobs / summary.seconds if summary.seconds > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    small = args.jobs // 10
    logs = Path(tempfile.mkdtemp(prefix="pgwork-cpu-per-job-"))
    with LabDatabase(None, "pgwork_lab_cpu") as lab:
        data_dir = lab.one("show_data_directory")["data_directory"]
        postmaster = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
        fleet = WorkerFleet(lab.dsn, APP, logs, ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"))

        def enqueue_noop(jobs: int) -> None:
            level(lab)
            lab.queue.enqueue_many([NewJob(NOOP_JOB_TYPE, {"n": n}) for n in range(jobs)])
            lab.analyze()

        def worker(jobs: int) -> float:
            starts.append(jobs)
            options = ("--burst", "--batch", str(args.batch), "--concurrency", str(args.concurrency))
            process = fleet.start(f"cpu-{len(starts)}", *options)
            while process.alive():  # alive() reaps it once it has exited: its CPU is then counted
                time.sleep(0.02)
            return rows_rate(lab)

        def enqueue_lab(jobs: int) -> None:
            level(lab)
            lab.enqueue(jobs)

        def api(jobs: int) -> float:
            # The lab's API loop (claimers._run_skiplocked, finish "many"), run in this process so its CPU
            # is counted (the lab's claimers run under a forkserver, not as this process's children).
            while claimed := lab.queue.claim("api", job_types=[JOB_TYPE], limit=args.batch, lease=60):
                outcomes = lab.queue.succeed_many([(j.lease, {"ok": True}) for j in claimed]).values()
                if any(o is not Completion.CREATED for o in outcomes):
                    raise SystemExit("a fenced completion did not write its result")
            return rows_rate(lab)

        peer: dict[str, Any] = {}
        starts: list[int] = []

        def pgqueuer_enqueue(jobs: int) -> None:
            level(lab)
            command = [sys.executable, "-m", "pgwork.tools.lab.pgqueuer_drain", str(jobs), str(args.batch)]
            env = {**worker_env(lab.dsn), GATE_ENV: "1"}
            process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert process.stdout is not None
            if process.stdout.readline().strip() != "enqueued":
                raise SystemExit("pgqueuer_drain did not enqueue")
            peer["process"], peer["before"] = process, proc_cpu(process.pid)

        def pgqueuer(jobs: int) -> float:
            process: subprocess.Popen[str] = peer["process"]
            out, _ = process.communicate("go\n", timeout=jobs / 50 + 120)
            figures = json.loads(out.strip().splitlines()[-1])
            if process.returncode != 0 or figures["done"] != jobs or figures["left"] != 0:
                raise SystemExit(f"pgqueuer drain failed: {figures}")
            return float(jobs / figures["seconds"])

        sides = {
            "pgwork worker": Drain(enqueue_noop, worker),
            "Queue API loop": Drain(enqueue_lab, api),
            "pgqueuer (asyncpg)": Drain(pgqueuer_enqueue, pgqueuer, lambda: float(peer["before"])),
        }
        figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
        try:
            for n in range(args.rounds):
                order = list(sides) if n % 2 == 0 else list(reversed(sides))
                for name in order:
                    # Per job at the margin: a drain of `small` jobs takes out what a process's start-up,
                    # connections and shutdown cost whatever the count.
                    c0, s0, _ = measure(postmaster, sides[name], small)
                    c, s, rate = measure(postmaster, sides[name], args.jobs)
                    per = 1e6 / (args.jobs - small)
                    figures[name].append(((c - c0) * per, (s - s0) * per, rate))
                    print(f"round {n + 1} {name:<20} client {figures[name][-1][0]:6.1f} µs/job, "
                          f"server {figures[name][-1][1]:6.1f} µs/job, {rate:8.0f} jobs/s", flush=True)  # fmt: skip
        finally:
            fleet.stop_all()

    def cell(values: list[float], digits: int = 1) -> str:
        return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"

    print(f"\n{args.jobs} jobs, batch {args.batch}, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print("| side | client CPU µs/job | server CPU µs/job | total | jobs/s (noisy) |")
    print("|---|---|---|---|---|")
    for name, rows in figures.items():
        client = [r[0] for r in rows]
        server = [r[1] for r in rows]
        total = [a + b for a, b in zip(client, server, strict=True)]
        print(f"| {name} | {cell(client)} | {cell(server)} | {cell(total)} | {cell([r[2] for r in rows], 0)} |")


if __name__ == "__main__":
    main()
