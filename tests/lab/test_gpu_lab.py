"""The gpu and cpu-bound experiments: their pure parts, and `pgwork bench --quick --only gpu --only
cpu-bound` end to end (the simulated model; the CUDA series says why it was skipped)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgwork.tools.lab import models
from pgwork.tools.lab.gpu import bare_rates

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("spec", "a", "b"), [("sim:0.004,0.0001", 0.004, 0.0001), ("sim:0,0", 0.0, 0.0), (None, 0.004, 0.0001)]
)
def test_the_simulated_model_is_read_from_its_spec(spec: str | None, a: float, b: float) -> None:
    model = models.load(spec)
    assert isinstance(model, models.SimModel) and (model.a, model.b) == (a, b)


@pytest.mark.parametrize("spec", ["sim", "sim:1", "gpu:1,2", "sim:a,b"])
def test_a_bad_model_spec_says_what_to_write(spec: str) -> None:
    with pytest.raises(ValueError, match="write torch, or sim:A,B"):
        models.load(spec)


def test_bare_rates_count_sequences_by_batch_size() -> None:
    rates = bare_rates(models.SimModel(0.0, 0.0), (1, 8), 0.05)
    assert set(rates) == {1, 8} and all(r > 0 for r in rates.values())


def test_the_cpu_job_reports_its_own_costs() -> None:
    figures = models.cpu_job(1, 50, 2)
    assert figures["wall"] > 0 and figures["cpu"] > 0 and figures["faults"] >= 0


@pytest.mark.slow
def test_quick_gpu_and_cpu_bound_runs_write_their_figures(admin_dsn: str, tmp_path: Path) -> None:
    database = f"pgwork_lab_g_{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pgwork.cli", "bench", "--quick", "--only", "gpu", "--only", "cpu-bound"]
    try:
        done = subprocess.run(
            [*cmd, "--dsn", admin_dsn, "--database", database, "--out", str(tmp_path), "--no-plots"],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (tmp_path / "results" / "benchmark.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    series = {(r["experiment"], r["series"], r["metric"]) for r in rows}
    assert ("gpu", "torch", "skipped") in series  # --quick never runs the CUDA model
    assert ("gpu", "sim bare loop", "rate") in series
    assert ("gpu", "sim pgwork one job per call", "rate") in series
    for name in ("bare, on its main thread", "pgwork worker, thread isolation", "pgwork worker, process isolation"):
        assert ("cpu-bound", name, "rate") in series
        assert ("cpu-bound", name, "page faults per job") in series
