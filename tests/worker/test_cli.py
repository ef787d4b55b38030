"""Bad `pgwork worker` options: one clear line on stderr, exit 2, no traceback."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.workers import ROOT, worker_command, worker_env


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--concurrency", "0"], "pgwork worker: --concurrency: 0 is out of range (use 1..1000)"),
        (["--lease", "30s", "--heartbeat", "20s"], "pgwork worker: --heartbeat: 20s is more than a third"),
        (["--lease", "often"], "pgwork worker: --lease: 'often' is not a duration"),
        (["--job-types", "sleep,nope"], "pgwork worker: --job-types: no handler registered for nope"),
        (["--app", "no_such_module_here"], "pgwork worker: --app: cannot import 'no_such_module_here'"),
    ],
)
def test_bad_option_is_one_clear_line(dsn: str, args: list[str], expected: str) -> None:
    cmd = worker_command(dsn, "x", *args)
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=worker_env(), cwd=str(ROOT), timeout=30)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(expected), lines[0]
    assert "Traceback" not in proc.stderr


def test_building_the_cli_registers_no_handlers() -> None:
    # Every worker process builds the parser; the demo's handler must not sneak into its registry.
    from pgwork.cli import build_parser
    from pgwork.worker.registry import REGISTRY

    build_parser()
    assert REGISTRY.get("demo.extract_invoice") is None
