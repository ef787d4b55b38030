"""`pgwork bench`: run the lab's experiments, append to the CSV, regenerate the markdown and plots.

--quick finishes in under two minutes and fails (exit 1) only when one of pgwork's correctness
facts fails (a duplicate claim, an inflated attempt_count, a job not done). The full mode
prints figures and asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgwork.tools.lab import (
    backlog,
    bulk,
    claimers,
    claims,
    cpubound,
    crash,
    drain,
    gpu,
    heartbeat,
    held,
    history,
    latency,
    linear,
    mvcc,
    noisy,
    pivot,
    plots,
    pooled,
    prune,
    report,
    results,
    waits,
    wake,
    workers,
)
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome

EXPERIMENTS: dict[str, Any] = {
    "claims": claims,
    "held": held,
    "history": history,
    "crash": crash,
    "drain": drain,
    "wake": wake,
    "heartbeat": heartbeat,
    "waits": waits,
    "bulk": bulk,
    "prune": prune,
    "noisy": noisy,
    "backlog": backlog,
    "workers": workers,
    "linear": linear,
    "gpu": gpu,
    "cpu-bound": cpubound,
    "pooler": pooled,
    "latency": latency,
    "mvcc": mvcc,
}
# Run only when named with --only: gpu and cpu-bound measure models and CPU-bound jobs for minutes, not
# the queue; the pooler experiment needs PgBouncer installed and starts a fleet of worker processes (100
# in the full plan); latency repeats the worker drain at each RTT; mvcc holds a snapshot for 10 minutes per
# case at 500 jobs/s (sized by PGWORK_LAB_MVCC).
ON_REQUEST = frozenset({"gpu", "cpu-bound", "pooler", "latency", "mvcc"})
CSV_PATH = Path("results/benchmark.csv")
DOC_PATH = Path("docs/benchmarks.md")
IMG_DIR = Path("docs/img")


def configure(p: argparse.ArgumentParser) -> None:
    """`pgwork bench`'s options (the CLI made the subparser)."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--quick", action="store_true", help="small runs for CI (< 2 minutes); asserts correctness only")
    p.add_argument(
        "--only",
        action="append",
        choices=sorted(EXPERIMENTS),
        metavar="NAME",
        help=f"run only this experiment (repeatable): {', '.join(EXPERIMENTS)} "
        f"({', '.join(sorted(ON_REQUEST))} only when named)",
    )
    p.add_argument(
        "--dsn",
        dest="bench_dsn",
        metavar="DSN",
        help="a PostgreSQL server to run on (the lab creates and drops its own database there); "
        "default: an embedded PostgreSQL in a temporary directory",
    )
    p.add_argument(
        "--database",
        default="pgwork_lab",
        help="the lab's database, dropped and recreated: must start with pgwork_lab (default pgwork_lab)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="write results/benchmark.csv and docs/benchmarks.md under this folder (`--out .` in a pgwork "
        "checkout updates its own); default: a new pgwork-bench-RUN folder here, ignored by git, so a run "
        "never overwrites a project's docs/ or results/ nor shows in git status",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument("--report-only", action="store_true", help="only regenerate the markdown and plots from the CSV")
    p.set_defaults(func=cmd_bench)


def _say(text: str) -> None:
    print(text, flush=True)


def new_run_folder(parent: Path, run_id: str) -> Path:
    """The default --out: a new pgwork-bench-RUN folder that git ignores wherever it lands (its own
    .gitignore says `*`, as a virtual environment's does), so a run leaves `git status` clean."""
    out = parent / f"pgwork-bench-{run_id}"
    out.mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("# written by pgwork bench: a run's results are not part of the project\n*\n")
    return out


def regenerate(out: Path, *, draw: bool) -> None:
    rows = results.read(out / CSV_PATH)
    names: list[str] = []
    if draw:
        try:
            names = plots.draw(rows, out / IMG_DIR)
        except ImportError:
            _say("matplotlib is not installed (pip install 'pgwork[lab]'): no plots drawn")
    doc = out / DOC_PATH
    doc.parent.mkdir(parents=True, exist_ok=True)
    page = report.render(rows, [f"img/{n}" for n in names])
    if doc.exists():  # a script's sections (figures the CSV does not hold) stay
        page = pivot.keep_written_sections(page, doc.read_text(encoding="utf-8"))
    doc.write_text(page, encoding="utf-8")
    _say(f"wrote {doc}" + (f" and {len(names)} plots in {out / IMG_DIR}" if names else ""))


def cmd_bench(args: argparse.Namespace) -> int:
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if args.report_only:
        if args.out is None:
            print(
                "pgwork bench: --report-only needs --out DIR, the folder holding results/benchmark.csv", file=sys.stderr
            )
            return 2
        regenerate(args.out, draw=not args.no_plots)
        return 0
    out: Path = args.out if args.out is not None else new_run_folder(Path.cwd(), run_id)
    _say(f"writing results under {out}")
    server = args.bench_dsn or getattr(args, "dsn", None)
    mode = "quick" if args.quick else "full"
    chosen = args.only or [name for name in EXPERIMENTS if name not in ON_REQUEST]
    claimers.preload()
    violations: list[str] = []
    facts = 0
    started = time.monotonic()
    with LabDatabase(server, args.database) as lab:
        machine = [Measurement("machine", "this machine", "", k, v) for k, v in lab.machine().items()]
        _store(out, machine, run_id, mode)
        for name in chosen:
            module = EXPERIMENTS[name]
            _say(f"{name} ({mode})")
            t0 = time.monotonic()
            run: Callable[..., Outcome] = module.run
            outcome = run(lab, module.plan(args.quick), _say)
            _store(out, outcome.measurements, run_id, mode)
            violations += outcome.violations
            facts += outcome.facts_checked
            _say(f"{name}: {len(outcome.measurements)} figures in {time.monotonic() - t0:.0f}s")
    regenerate(out, draw=not args.no_plots)
    _say(f"lab finished in {time.monotonic() - started:.0f}s; {facts} runs checked for pgwork's correctness facts")
    if violations:
        for v in violations:
            print(f"pgwork bench: correctness fact failed: {v}", file=sys.stderr)
        return 1
    _say("correctness: 0 duplicate claims, 0 inflated attempt_counts, every job done with one result")
    return 0


def _store(out: Path, measurements: list[Measurement], run_id: str, mode: str) -> None:
    recorded = datetime.now(UTC).isoformat(timespec="seconds")
    results.append(out / CSV_PATH, results.to_rows(measurements, run=run_id, recorded_at=recorded, mode=mode))
