"""Experiment: CPU-bound jobs (numpy, one BLAS thread) through `pgwork worker` beside bare
processes doing the same jobs, same run (issue 29: >= 0.98x a bare process for 0.5 s jobs).

Series, each with W processes at once: bare processes running the jobs in a loop on their main
thread, the same on a second thread (a handler's place in a thread-isolated worker), `pgwork
worker --concurrency 1` (threads), and `--isolation process` (the handler on a child's main
thread). Beside each rate, what separates them: the handler's own wall and CPU seconds and page
faults per job (read from its results), and the worker's time between jobs (the span per job
less the handler's wall). Where numpy's arrays come from differs between a process's main
thread and its other threads (glibc's main arena is trimmed back to the system after each job,
a thread's arena is not), which is measured here, not assumed.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet, worker_env
from pgwork.tools.lab.gpu import drain
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome

NAME = "cpu-bound"
APP = "pgwork.tools.lab.gpu_app"
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
BARE = {"main": "bare, on its main thread", "thread": "bare, on a second thread"}
TARGET = 0.98
SIZE = 300  # matrix side: 0.7 MB arrays, allocated and freed a few times per round


@dataclass(frozen=True)
class Plan:
    job_seconds: float
    jobs_per_process: int
    processes: tuple[int, ...]
    rounds: int


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(0.05, 10, (1,), 1)
    return Plan(0.5, 8, (1, 4, 8), 2)


def bare(jobs: int, rounds: int, where: str) -> dict[str, float]:
    """Run `jobs` cpu jobs in this process, on its main thread or on a second one."""
    from pgwork.tools.lab.models import cpu_job

    figures: list[dict[str, Any]] = []

    def loop() -> None:
        figures.extend(cpu_job(n, SIZE, rounds) for n in range(jobs))

    cpu_job(0, SIZE, 1)
    start = time.perf_counter()
    if where == "thread":
        worker = threading.Thread(target=loop)
        worker.start()
        worker.join()
    else:
        loop()
    seconds = time.perf_counter() - start
    count = max(jobs, 1)
    return {
        "seconds": seconds,
        "wall": sum(f["wall"] for f in figures) / count,
        "cpu": sum(f["cpu"] for f in figures) / count,
        "faults": sum(f["faults"] for f in figures) / count,
    }


def children_cpu() -> float:
    """CPU seconds of every child process this one has waited for (and of theirs it waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def outside_handler(cpu: float, startup: float, processes: int, jobs: int, handler_cpu: float) -> float:
    """CPU seconds per job spent outside the handler: the processes' CPU less their startup (a
    run with no job) and less what the handlers measured themselves. Pure."""
    return (cpu - processes * startup - jobs * handler_cpu) / jobs if jobs else float("nan")


def _bare_fleet(processes: int, jobs: int, rounds: int, where: str) -> dict[str, float]:
    env = {**worker_env(""), **ONE_BLAS_THREAD}
    cmd = [sys.executable, "-m", "pgwork.tools.lab.cpubound", str(jobs), str(rounds), where]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    reports = [json.loads(p.communicate(timeout=jobs * 60 + 120)[0].strip().splitlines()[-1]) for p in procs]
    return {
        "rate": processes * jobs / max(r["seconds"] for r in reports) if jobs else 0.0,
        **{k: sum(r[k] for r in reports) / processes for k in ("wall", "cpu", "faults")},
    }


def _rounds_for(seconds: float) -> int:
    """Rounds of the job making it last `seconds` here (timed in a bare process)."""
    probe = _bare_fleet(1, 3, 5, "main")
    return max(1, round(seconds / (probe["cpu"] / 5)))


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    rounds = _rounds_for(p.job_seconds)
    out.append(Measurement(NAME, "job", "", "rounds", rounds))
    log_dir = Path(os.environ.get("PGWORK_LAB_LOGS") or tempfile.mkdtemp(prefix="pgwork-lab-cpu-"))
    with WorkerFleet(lab.dsn, APP, log_dir) as fleet:
        fleet.env.update({**ONE_BLAS_THREAD, "PGWORK_LOG_LEVEL": "WARNING"})
        startup = _startup_cpu(lab, fleet, rounds, violations)
        for repeat in range(p.rounds):
            for w in p.processes:
                x = f"{w} processes" + (f", round {repeat + 1}" if p.rounds > 1 else "")
                jobs = w * p.jobs_per_process
                figures: dict[str, dict[str, float]] = {}
                for where in ("main", "thread"):
                    before = children_cpu()
                    figures[BARE[where]] = f = _bare_fleet(w, p.jobs_per_process, rounds, where)
                    f["outside"] = outside_handler(children_cpu() - before, startup["bare"], w, jobs, f["cpu"])
                for isolation in ("thread", "process"):
                    payloads: list[dict[str, object]] = [{"seed": n, "n": SIZE, "rounds": rounds} for n in range(jobs)]
                    names = [f"{isolation}-{w}-{repeat}-{i}" for i in range(w)]
                    lab.reset()
                    before = children_cpu()
                    rate = _drain_fleet(lab, fleet, payloads, names, isolation=isolation, violations=violations)
                    used = children_cpu() - before
                    row = lab.one("cpu_job_figures")
                    handler_cpu = float(row["cpu"] or 0)
                    figures[f"pgwork worker, {isolation} isolation"] = {
                        "rate": rate,
                        "wall": float(row["wall"] or 0),
                        "cpu": handler_cpu,
                        "faults": float(row["faults"] or 0),
                        "outside": outside_handler(used, startup[isolation], w, jobs, handler_cpu),
                    }
                base = figures[BARE["main"]]["rate"]
                for series, f in figures.items():
                    gap = w / f["rate"] - f["wall"] if f["rate"] > 0 else float("nan")
                    out += [
                        Measurement(NAME, series, x, "rate", round(f["rate"], 3), "jobs/s"),
                        Measurement(NAME, series, x, "x bare", round(f["rate"] / base, 3)),
                        Measurement(NAME, series, x, "handler wall", round(f["wall"] * 1000, 1), "ms"),
                        Measurement(NAME, series, x, "handler cpu", round(f["cpu"] * 1000, 1), "ms"),
                        Measurement(NAME, series, x, "page faults per job", round(f["faults"])),
                        Measurement(NAME, series, x, "between jobs", round(gap * 1000, 1), "ms"),
                        Measurement(NAME, series, x, "cpu outside the handler", round(f["outside"] * 1000, 2), "ms"),
                    ]
                    if series.startswith("pgwork"):  # issue 29: >= 0.98x a bare process for 0.5 s jobs
                        met = "met" if f["rate"] >= TARGET * base else "not met"
                        out.append(Measurement(NAME, series, x, f"target {TARGET}x bare", met))
                    say(
                        f"{NAME} {x} {series}: {f['rate']:.2f} jobs/s ({f['rate'] / base:.3f}x), "
                        f"handler {f['wall'] * 1000:.0f} ms wall {f['cpu'] * 1000:.0f} ms cpu "
                        f"{f['faults']:.0f} faults, {gap * 1000:.1f} ms between jobs, "
                        f"{f['outside'] * 1000:.2f} ms cpu outside the handler"
                    )
    return Outcome(out, violations, facts_checked=p.rounds * len(p.processes) * 2)


def _startup_cpu(lab: LabDatabase, fleet: WorkerFleet, rounds: int, violations: list[str]) -> dict[str, float]:
    """CPU seconds of one process that starts and exits with no job: a bare one, and a burst
    worker (with its children) in each isolation."""
    before = children_cpu()
    _bare_fleet(1, 0, rounds, "main")
    startup = {"bare": children_cpu() - before}
    for isolation in ("thread", "process"):
        lab.reset()
        before = children_cpu()
        _drain_fleet(lab, fleet, [], [f"startup-{isolation}"], isolation=isolation, violations=violations)
        startup[isolation] = children_cpu() - before
    return startup


def _drain_fleet(
    lab: LabDatabase,
    fleet: WorkerFleet,
    payloads: list[dict[str, object]],
    names: list[str],
    *,
    isolation: str,
    violations: list[str],
) -> float:
    """W workers at once (--concurrency 1 each); one worker is gpu.drain itself."""
    options = ["--concurrency", "1", "--isolation", isolation]
    if len(names) == 1:
        return drain(lab, fleet, "lab-cpu", payloads, name=names[0], options=options, violations=violations)
    lab.queue.enqueue_many([NewJob("lab-cpu", p) for p in payloads])
    lab.analyze()
    workers = [fleet.start(name, "--burst", *options) for name in names]
    for worker in workers:
        worker.process.wait(timeout=len(payloads) * 60 + 300)
    s = lab.summary()
    if s.succeeded != len(payloads) or s.inflated or any(w.process.returncode for w in workers):
        violations.append(f"{NAME} {isolation} x{len(names)}: {s.succeeded}/{len(payloads)} succeeded")
    return s.succeeded / s.seconds if s.seconds > 0 else float("nan")


if __name__ == "__main__":
    print(json.dumps(bare(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])))
    os._exit(0)
