"""Running `pgwork` as users do: a subprocess with a clean environment (no DATABASE_URL, PG* or
OTEL_* from the test run), the repository and the test apps (tests/support/apps) importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The apps tests hand to `--app` (pgwork_test_app, reliability_app): importable by module name.
APPS = Path(__file__).resolve().parent / "apps"


def env(dsn: str | None = None, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",) and not k.startswith(("PG", "OTEL_"))}
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(APPS)])
    if dsn is not None:
        out["DATABASE_URL"] = dsn
    out.update(extra)
    return out


def pgwork(*args: str, dsn: str | None = None, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    """`python -m pgwork.cli ARGS`, its output captured; `dsn` becomes DATABASE_URL, `extra` adds variables."""
    return subprocess.run(
        [sys.executable, "-m", "pgwork.cli", *args],
        capture_output=True,
        text=True,
        env=env(dsn, **extra),
        timeout=timeout,
        check=False,
    )


def worker(*args: str, dsn: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A burst worker over the reliability test app: runs what is ready, then exits."""
    return pgwork(
        "worker",
        "--app",
        "reliability_app",
        "--id",
        "rel-worker",
        "--metrics-port",
        "0",
        "--lease",
        "3s",
        *args,
        dsn=dsn,
        timeout=timeout,
    )


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line a refused command prints; fails on tracebacks or silence."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    assert lines, "no message"
    return lines[-1]
