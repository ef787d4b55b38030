"""The short seeded chaos run CI does: 2,000 jobs, 6 worker processes, every kind of fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_seeded_chaos_run_keeps_every_invariant() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PGWORK_TEST_DSN")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pgwork.cli",
            "chaos",
            "--jobs",
            "2000",
            "--workers",
            "6",
            "--seed",
            "7",
            "--duration",
            "40s",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert out.stdout.strip(), out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(figures, indent=2))
    assert figures["violations"] == [], out.stderr[-3000:]
    assert out.returncode == 0
    assert figures["jobs enqueued"] == 2000
    assert figures["succeeded"] + figures["dead"] == 2000
    assert figures["lost"] == 0 and figures["stuck (not succeeded/dead)"] == 0
    assert figures["duplicate results / successes"] == 0 and figures["writes by stale owners"] == 0
    assert figures["attempt_count != claims"] == 0 and figures["worker crashes"] == 0
    assert figures["password in logs"] == 0
    # The run really was hostile: every kind of fault happened, and leases were taken from
    # stopped workers, so "a resumed worker wrote nothing" was put to the test.
    for kind in ("kill_worker", "restart_db", "crash_db", "terminate_backends", "pause_worker"):
        assert figures[f"faults: {kind}"] >= 1, kind
    assert figures["  of them from paused workers"] >= 1
    assert figures["claims (logged)"] > 2000
