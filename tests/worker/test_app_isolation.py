"""`pgwork worker --app X` claims only the job types X registers.

pgwork ships handler modules of its own (the lab's `lab-crash`, the chaos and demo apps). Any of
them imported into a worker process (by the CLI, by a plugin, by the app itself earlier) used to
land in the worker's registry, so anyone who could enqueue `lab-crash` jobs could park every
worker slot of every fleet on sleeping jobs."""

from __future__ import annotations

import importlib
import subprocess
import sys

import psycopg

from pgwork.db import Queue
from pgwork.worker.command import import_app
from pgwork.worker.registry import REGISTRY
from tests.support.workers import ROOT, worker_env

# Where the lab's crash app lives: before and after its move under pgwork/tools.
LAB_APPS = ("pgwork.tools.lab.crash_app", "pgwork.lab.crash_app")
PRELUDE = f"""
import importlib, sys
for name in {LAB_APPS!r}:
    try:
        importlib.import_module(name)
        break
    except ModuleNotFoundError:
        pass
else:
    raise SystemExit("no lab crash app to import")
from pgwork.worker.registry import REGISTRY
assert REGISTRY.get("lab-crash") is not None, "the lab registered its handler in this process"
from pgwork.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _import_lab() -> None:
    for name in LAB_APPS:
        try:
            importlib.import_module(name)
            return
        except ModuleNotFoundError:
            continue
    raise AssertionError("no lab crash app to import")


def test_import_app_returns_only_the_apps_handlers() -> None:
    _import_lab()
    assert REGISTRY.get("lab-crash") is not None
    registry = import_app("pgwork_test_app")
    assert "lab-crash" not in registry.job_types()
    assert {"noop", "sleep", "fail"} <= set(registry.job_types())
    # Asking for the lab's module by name is the one way to run it.
    lab = import_app(next(n for n in LAB_APPS if n in sys.modules))
    assert lab.job_types() == ["lab-crash"]


def test_worker_never_claims_a_lab_crash_job_even_with_the_lab_imported(dsn: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        parked = q.enqueue("lab-crash", {"seconds": 600}, priority=0)
        ours = q.enqueue("noop", {"n": 1}, priority=100)
    args = ["--dsn", dsn, "worker", "--app", "pgwork_test_app", "--id", "iso", "--metrics-port", "0", "--burst"]
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE, *args],
        capture_output=True,
        text=True,
        env=worker_env(),
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "lab-crash" not in proc.stderr.split("taking", 1)[1].splitlines()[0]
    with psycopg.connect(dsn) as conn:
        rows = dict(conn.execute("SELECT id, status::text || ':' || attempt_count FROM pgwork.jobs").fetchall())
    assert rows[ours] == "succeeded:1"
    assert rows[parked] == "pending:0"  # never claimed


def test_asking_for_a_type_the_app_does_not_register_is_refused(dsn: str) -> None:
    args = ["--dsn", dsn, "worker", "--app", "pgwork_test_app", "--id", "iso", "--metrics-port", "0"]
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE, *args, "--job-types", "noop,lab-crash", "--burst"],
        capture_output=True,
        text=True,
        env=worker_env(),
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--job-types: no handler registered for lab-crash in pgwork_test_app" in proc.stderr
