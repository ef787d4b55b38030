"""Experiment: inference fed by pgwork, beside the bare loop feeding the same model (issue 29).

Three ways side by side, same model, same run: the bare loop by batch size (no queue at all),
`pgwork worker` with one job per handler call (threads, and `--isolation process`), and a
batch handler (`@pgwork.handler(..., batch=64, batch_wait="20ms")`, in both isolations). The
model is the lab's (pgwork.tools.lab.models): PyTorch's encoder when CUDA is available (the
GPU series; otherwise a figure says why they were skipped), and always the simulated model
costing a + b*n per batch of n, whose shape the CPU-only CI can check: the batch handler at
>= 0.8x its bare batched loop. Rates are read from the rows (first start to last completion).
"""

from __future__ import annotations

import inspect
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pgwork
from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import models
from pgwork.tools.lab.labdb import LabDatabase, RunSummary
from pgwork.tools.lab.results import Measurement, Outcome

NAME = "gpu"
APP = "pgwork.tools.lab.gpu_app"
BATCH = 64
# Targets of issue 29: a batch handler's rate against the bare loop at its batch size.
TARGET_GPU = 0.8
TARGET_SIM = 0.8


@dataclass(frozen=True)
class Plan:
    batches: tuple[int, ...]
    bare_seconds: float
    jobs_one: int
    jobs_batch: int
    concurrency: tuple[int, ...]
    # Interleaved rounds of the bare loop and the batch handler at batch BATCH (gpu_rounds).
    rounds: int = 5
    sim: str = models.DEFAULT_SIM
    torch: bool = True  # also the CUDA model, when it can run


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((1, 8, BATCH), 1.0, 150, 1500, (1,), rounds=2, torch=False)
    return Plan((1, 8, 32, BATCH, 128), 3.0, 1500, 20000, (1, 8), rounds=5)


def batch_handlers() -> bool:
    """Does this pgwork have batch handlers (issue 29 part 1)?"""
    return "batch" in inspect.signature(pgwork.handler).parameters


def bare_rates(model: models.Model, batches: tuple[int, ...], seconds: float) -> dict[int, float]:
    """Sequences per second of the model called in a loop, per batch size."""
    rates = {}
    for b in batches:
        model.infer(b)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model.infer(b)
            n += b
        rates[b] = n / (time.perf_counter() - start)
    return rates


class JobsDatabase(Protocol):
    """Where a drain runs: the lab's database, or a baseline checkout's (workers.Baseline)."""

    queue: Queue

    def reset(self) -> None: ...
    def analyze(self) -> None: ...
    def summary(self) -> RunSummary: ...


def drain(
    lab: JobsDatabase,
    fleet: WorkerFleet,
    job_type: str,
    payloads: list[dict[str, object]],
    *,
    name: str,
    options: list[str],
    violations: list[str],
) -> float:
    """Jobs per second of one `pgwork worker --burst` draining `payloads`; a correctness fact
    that fails (a job not done, one claimed twice) goes to `violations`."""
    lab.reset()
    for start in range(0, len(payloads), 5000):
        lab.queue.enqueue_many([NewJob(job_type, p) for p in payloads[start : start + 5000]])
    lab.analyze()
    worker = fleet.start(name, "--burst", *options)
    try:
        worker.process.wait(timeout=len(payloads) * 0.05 + 300)
    except subprocess.TimeoutExpired:
        worker.process.kill()
        violations.append(f"{NAME} {name}: the worker did not drain {len(payloads)} jobs; see {worker.log_path}")
        return float("nan")
    s = lab.summary()
    if not payloads:
        return float("nan")
    if worker.process.returncode != 0 or s.succeeded != len(payloads) or s.inflated:
        violations.append(
            f"{NAME} {name}: exit {worker.process.returncode}, {s.succeeded}/{len(payloads)} succeeded, "
            f"{s.inflated} claimed twice; see {worker.log_path}"
        )
    return s.succeeded / s.seconds if s.seconds > 0 else float("nan")


class GpuBusy:
    """nvidia-smi's utilisation samples while a series runs (none without nvidia-smi)."""

    def __init__(self) -> None:
        self._smi: subprocess.Popen[str] | None = None

    def __enter__(self) -> GpuBusy:
        exe = shutil.which("nvidia-smi")
        if exe is not None:
            cmd = [exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200"]
            self._smi = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.median: float | None = None
        if self._smi is not None:
            self._smi.terminate()
            out = self._smi.communicate(timeout=10)[0]
            busy = [int(x) for x in out.split() if x.strip().isdigit() and int(x) > 0]
            self.median = statistics.median(busy) if busy else 0.0


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    specs = [p.sim]
    problem = models.cuda_problem() if p.torch else "not in --quick runs"
    if problem is None:
        specs.insert(0, "torch")
    else:
        out.append(Measurement(NAME, "torch", "", "skipped", problem))
        say(f"{NAME}: the CUDA series skipped: {problem}")
    if not batch_handlers():
        out.append(Measurement(NAME, "batch handler", "", "skipped", "this pgwork has no batch handlers"))
    for spec in specs:
        out += _one_model(lab, p, spec, say, violations)
    return Outcome(out, violations, facts_checked=len(specs))


def _one_model(
    lab: LabDatabase, p: Plan, spec: str, say: Callable[[str], None], violations: list[str]
) -> list[Measurement]:
    model = models.load(spec)
    series = model.name
    out = [Measurement(NAME, series, "", "model", spec if spec != "torch" else getattr(model, "device", "cuda"))]
    bare = bare_rates(model, p.batches, p.bare_seconds)
    for b, rate in bare.items():
        out.append(Measurement(NAME, f"{series} bare loop", f"batch {b}", "rate", round(rate, 1), "seq/s"))
    say(f"{NAME} {series}: bare " + ", ".join(f"b{b} {r:.0f}/s" for b, r in bare.items()))
    log_dir = Path(os.environ.get("PGWORK_LAB_LOGS") or tempfile.mkdtemp(prefix="pgwork-lab-gpu-"))
    env = {"PGWORK_LAB_MODEL": spec, "PGWORK_LAB_BATCH": str(BATCH), "PGWORK_LOG_LEVEL": "WARNING"}
    if batch_handlers():
        from pgwork.tools.lab.gpu_rounds import side_by_side  # it imports this module

        with WorkerFleet(lab.dsn, APP, log_dir) as fleet:
            fleet.env.update(env)
            out += side_by_side(
                lab, fleet, model, jobs=p.jobs_batch, rounds=p.rounds, env=env, log_dir=log_dir, say=say,
                violations=violations,
            )  # fmt: skip
    del model  # the workers load their own
    with WorkerFleet(lab.dsn, APP, log_dir) as fleet:
        fleet.env.update(env)
        runs: list[tuple[str, str, str, int, list[str], int]] = []
        for c in p.concurrency:
            runs.append(("one job per call", f"concurrency {c}", "lab-infer", p.jobs_one, ["--concurrency", str(c)], 1))
        runs.append(
            ("one job per call", "process, concurrency 1", "lab-infer", p.jobs_one, ["--isolation", "process"], 1)
        )
        if batch_handlers():
            # Several slots let the database work of one batch overlap the model's work on another.
            for c in p.concurrency:
                runs.append(
                    ("batch handler", f"batch {BATCH}, concurrency {c}", "lab-infer-batch", p.jobs_batch,
                     ["--concurrency", str(c)], BATCH)
                )  # fmt: skip
            runs.append(
                ("batch handler", f"process, batch {BATCH}", "lab-infer-batch", p.jobs_batch,
                 ["--isolation", "process"], BATCH)
            )  # fmt: skip
        for how, x, job_type, jobs, options, against in runs:
            # A process-isolated worker's own process loads no model (only its children do).
            fleet.env["PGWORK_LAB_PROCESS"] = "1" if "process" in options else ""
            with GpuBusy() as busy:
                payloads: list[dict[str, object]] = [{"n": n} for n in range(jobs)]
                name = f"{series}-{len(out)}"
                rate = drain(lab, fleet, job_type, payloads, name=name, options=options, violations=violations)
            base = bare.get(against, float("nan"))
            out.append(Measurement(NAME, f"{series} pgwork {how}", x, "rate", round(rate, 1), "jobs/s"))
            out.append(Measurement(NAME, f"{series} pgwork {how}", x, f"x bare batch {against}", round(rate / base, 3)))
            if busy.median is not None:
                out.append(Measurement(NAME, f"{series} pgwork {how}", x, "gpu busy median", busy.median, "%"))
            if how == "batch handler":
                target = TARGET_GPU if series == "torch" else TARGET_SIM
                met = "met" if rate >= target * base else "not met"
                out.append(Measurement(NAME, f"{series} pgwork {how}", x, f"target {target}x bare", met))
            say(f"{NAME} {series} {how} ({x}): {rate:.0f} jobs/s, {rate / base:.2f}x the bare loop at batch {against}")
            if busy.median is not None:
                say(f"{NAME} {series} {how} ({x}): GPU busy {busy.median}% (median of non-idle samples)")
    return out
