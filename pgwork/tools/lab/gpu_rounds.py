"""The gpu experiment's side-by-side rounds (issue 29): the bare loop at batch 64 and the batch
handler through one `pgwork worker --concurrency 1`, on the same number of sequences, interleaved
round by round on the same (shared) machine. Reported as median [min-max] of each rate and of the
per-round ratio, which is the figure the target is read from: drift between rounds hits both alike.

With PGWORK_LAB_BASELINE=DIR (a pgwork checkout, e.g. main) that checkout's worker drains the same
jobs in the same rounds, on a database of its own migrated by that checkout (pgwork.tools.lab.workers'
Baseline): a before/after in one run. The order within a round rotates, so none always follows the
same drain.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import models
from pgwork.tools.lab.gpu import APP, BATCH, NAME, TARGET_GPU, TARGET_SIM, drain
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement
from pgwork.tools.lab.workers import BASELINE_ENV, Baseline

BARE = "bare loop"
WORKER = "pgwork worker"
BEFORE = "pgwork worker (baseline)"
JOB_TYPE = "lab-infer-batch"
OPTIONS = ("--concurrency", "1")


def bare_rate(model: models.Model, sequences: int) -> float:
    """Sequences per second of the model called at batch BATCH until `sequences` are done."""
    calls = max(1, -(-sequences // BATCH))
    start = time.perf_counter()
    for _ in range(calls):
        model.infer(BATCH)
    return calls * BATCH / (time.perf_counter() - start)


def spread(values: list[float]) -> tuple[float, float, float]:
    """Median, min and max (pure)."""
    return statistics.median(values), min(values), max(values)


def shown(values: list[float], digits: int = 0) -> str:
    """`median [min-max]` (pure)."""
    med, lo, hi = spread(values)
    return f"{med:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def side_by_side(
    lab: LabDatabase,
    fleet: WorkerFleet,
    model: models.Model,
    *,
    jobs: int,
    rounds: int,
    env: dict[str, str],
    log_dir: Path,
    say: Callable[[str], None],
    violations: list[str],
) -> list[Measurement]:
    series = f"{model.name} side by side"
    x = f"batch {BATCH}, concurrency 1, {rounds} rounds"
    source = os.environ.get(BASELINE_ENV)
    baseline = Baseline(lab, source, log_dir / "baseline", app=APP, options=("--grace", "5s")) if source else None
    rates: dict[str, list[float]] = {BARE: [], WORKER: []}
    if baseline is not None:
        baseline.fleet.env.update(env)
        rates[BEFORE] = []
    payloads: list[dict[str, object]] = [{"n": n} for n in range(jobs)]
    try:
        for n in range(rounds):
            order = list(rates)
            order = order[n % len(order) :] + order[: n % len(order)]
            for who in order:
                if who == BARE:
                    rate = bare_rate(model, jobs)
                elif who == WORKER:
                    rate = drain(
                        lab, fleet, JOB_TYPE, payloads, name=f"sbs-{n}", options=list(OPTIONS), violations=violations
                    )
                else:
                    assert baseline is not None
                    rate = drain(
                        baseline, baseline.fleet, JOB_TYPE, payloads, name=f"sbs-base-{n}", options=list(OPTIONS),
                        violations=violations,
                    )  # fmt: skip
                rates[who].append(rate)
            say(
                f"{NAME} {series} round {n + 1}: "
                + ", ".join(f"{who} {rates[who][-1]:.0f}/s" for who in rates)
                + f", worker {rates[WORKER][-1] / rates[BARE][-1]:.2f}x bare"
            )
    finally:
        if baseline is not None:
            baseline.close()
    target = TARGET_GPU if model.name == "torch" else TARGET_SIM
    out: list[Measurement] = []
    for who, values in rates.items():
        med, lo, hi = spread(values)
        unit = "seq/s" if who == BARE else "jobs/s"
        out += [Measurement(NAME, f"{series}: {who}", x, m, round(v, 1), unit) for m, v in _triple(med, lo, hi)]
        if who != BARE:
            ratios = [w / b for w, b in zip(values, rates[BARE], strict=True)]
            med, lo, hi = spread(ratios)
            out += [
                Measurement(NAME, f"{series}: {who}", x, f"x bare {m}", round(v, 3)) for m, v in _triple(med, lo, hi)
            ]
            met = "met" if med >= target else "not met"
            out.append(Measurement(NAME, f"{series}: {who}", x, f"target {target}x bare (median)", met))
            say(f"{NAME} {series}: {who} {shown(values)} jobs/s, {shown(ratios, 2)}x the bare loop ({met})")
        else:
            say(f"{NAME} {series}: bare loop at batch {BATCH} {shown(values)} seq/s")
    return out


def _triple(med: float, lo: float, hi: float) -> list[tuple[str, float]]:
    return [("median", med), ("min", lo), ("max", hi)]
