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


# -- an app that exits is not a success (issue 24, class 8) --------------------------------------

BROKEN_APPS = [  # (module body, words in the one line)
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) before it finished"),
    ("import sys\nsys.exit(3)\n", "called sys.exit(3) before it finished"),
    ("raise SystemExit\n", "called sys.exit(None) before it finished"),
    ("exit()\n", "called sys.exit(None) before it finished"),
    ("raise KeyboardInterrupt\n", "failed: KeyboardInterrupt"),
    ("raise GeneratorExit('odd')\n", "failed: GeneratorExit: odd"),
    ("raise RuntimeError('no config file')\n", "failed: RuntimeError: no config file"),
    ("import no_such_dependency_here\n", "failed: No module named 'no_such_dependency_here'"),
    ("X = 1  # registers nothing\n", "registers no handlers"),
    ("import pgwork\napp = pgwork.App()\n", "registers no handlers"),
]


@pytest.mark.parametrize(("body", "words"), BROKEN_APPS, ids=[b[1][:30] for b in BROKEN_APPS])
def test_an_app_that_exits_or_fails_to_import_is_one_line_and_exit_2(
    dsn: str, tmp_path: pytest.TempPathFactory, body: str, words: str
) -> None:
    (tmp_path / "broken_app_mod.py").write_text(body)  # type: ignore[operator]
    target = "broken_app_mod:app" if "App()" in body else "broken_app_mod"
    cmd = [*worker_command(dsn, "x", "--burst")]
    cmd[cmd.index("pgwork_test_app")] = target
    env = worker_env(PYTHONPATH=f"{ROOT}:{tmp_path}")
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=30)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pgwork worker: --app:"), proc.stderr
    assert words in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
