"""PNG figures from the CSV rows (matplotlib, Agg backend; install with `pip install 'pgwork[lab]'`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgwork.tools.lab.pivot import Table, pivot, select
from pgwork.tools.lab.results import Row


def _series(t: Table, series: str, metric: str) -> tuple[list[float], list[float]]:
    points = sorted(
        (float(x), t.value(s, x, metric)) for s, x in t.keys if s == series and not math.isnan(t.value(s, x, metric))
    )
    return [p[0] for p in points], [p[1] for p in points]


def _names(t: Table) -> list[str]:
    return list(dict.fromkeys(s for s, _ in t.keys))


def draw(rows: Sequence[Row], folder: Path) -> list[str]:
    """Draw what the rows allow into `folder`; returns file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        written.append(name)

    claims = pivot(select(rows, "claims"))
    if claims.keys:
        for metric, name, ylabel in (
            ("jobs/s", "bench-claims-throughput.png", "jobs/s (database-timed)"),
            ("executions", "bench-claims-executions.png", "executions per job (1.0 = each job ran once)"),
            ("claim p50", "bench-claims-latency.png", "claim p50 (ms)"),
        ):
            fig, ax = plt.subplots(figsize=(6.4, 4))
            for s in _names(claims):
                xs, ys = _series(claims, s, metric)
                if metric == "executions":
                    # Runs differ in job count (the 1-worker points ran fewer jobs): plot the ratio.
                    _, jobs = _series(claims, s, "jobs")
                    ys = [y / j for y, j in zip(ys, jobs, strict=True)]
                ax.plot(xs, ys, marker="o", label=s)
            if metric == "jobs/s":
                xs, _ = _series(claims, "skiplocked", metric)
                job_seconds = _job_seconds(claims)
                if xs and job_seconds:
                    ax.plot(xs, [x / job_seconds for x in xs], "k--", linewidth=1, label="linear")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers")
            ax.set_ylabel(ylabel)
            ax.legend()
            ax.grid(alpha=0.3)
            save(fig, name)

    held = pivot(select(rows, "held"))
    if held.keys:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
        for s in _names(held):
            xs, ys = _series(held, s, "longest open transaction")
            a1.plot(xs, ys, marker="o", label=s)
            xs, ys = _series(held, s, "backend_xmin age (max)")
            a2.plot(xs, ys, marker="o", label=s)
        a1.set_xlabel("job length (s)")
        a1.set_ylabel("longest open transaction (s)")
        a2.set_xlabel("job length (s)")
        a2.set_ylabel("backend_xmin age (xids)")
        for a in (a1, a2):
            a.legend()
            a.grid(alpha=0.3)
        save(fig, "bench-held.png")

    latency = pivot(select(rows, "history-latency"))
    if latency.keys:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for metric in ("claim p50", "claim p95"):
            xs, ys = _series(latency, "claim", metric)
            ax.plot([max(x, 1) for x in xs], ys, marker="o", label=metric)
        ax.set_xscale("log")
        ax.set_xlabel("history rows (0 drawn at 1)")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.legend()
        ax.grid(alpha=0.3)
        save(fig, "bench-history.png")

    drain = pivot(select(rows, "drain"))
    if drain.keys:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for s in _names(drain):
            xs, ys = _series(drain, s, "jobs/s")
            ax.plot(xs, ys, marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent claimers")
        ax.set_ylabel("jobs/s")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        save(fig, "bench-drain.png")

    noisy = pivot(select(rows, "noisy-neighbour"))
    if noisy.keys:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
        for s in _names(noisy):
            xs, ys = _series(noisy, s, "finding the row")
            a1.plot([max(x, 1) for x in xs], ys, marker="o", label=s)
            xs, ys = _series(noisy, s, "execution")
            a2.plot([max(x, 1) for x in xs], ys, marker="o", label=s)
        a1.set_ylabel("buffers to find the row")
        a2.set_ylabel("EXPLAIN ANALYZE execution (ms)")
        for a in (a1, a2):
            a.set_xscale("log")
            a.set_yscale("log")
            a.set_xlabel("pending jobs of type A (0 drawn at 1)")
            a.legend(fontsize=7)
            a.grid(alpha=0.3)
        save(fig, "bench-noisy-neighbour.png")

    reading = pivot(select(rows, "backlog-reading"))
    if reading.keys:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for s in _names(reading):
            xs, ys = _series(reading, s, "db time p50")
            ax.plot([max(x, 1) for x in xs], ys, marker="o", label=s)
        ax.axhline(20, color="k", linestyle="--", linewidth=1, label="target (20 ms)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pending jobs over 100 types (0 drawn at 1)")
        ax.set_ylabel("database time per reading, p50 (ms)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        save(fig, "bench-backlog-reading.png")

    workers = pivot(select(rows, "worker-drain"))
    if workers.keys:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for s in _names(workers):
            points = sorted(
                (int(x.removeprefix("batch ")), workers.value(s, x, "jobs/s"))
                for t, x in workers.keys
                if t == s and x.startswith("batch ") and not math.isnan(workers.value(s, x, "jobs/s"))
            )
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("--batch (jobs per claim)")
        ax.set_ylabel("jobs/s (median over rounds)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        save(fig, "bench-worker-drain.png")
    return written


def _job_seconds(t: Table) -> float:
    lengths = [t.value(s, x, "job length") for s, x in t.keys]
    return next((v for v in lengths if v > 0), 0.0)
