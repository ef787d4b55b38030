"""The layers hold: core <- worker <- operator <- tools <- cli (pyproject's [tool.importlinter]).

Statically, by import-linter over the whole package (including imports inside functions), and the
contracts shown to bite on a copy of the package with a violation planted; at run time, in fresh
interpreters: importing the package, the CLI or the operator loads no tool and registers no handler.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    # --no-cache: import-linter would otherwise write its cache into the working tree.
    return subprocess.run(
        [*command, "--no-cache", "--config", "pyproject.toml"],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "pgwork", tmp_path / "pgwork", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        # The core reaching up into the CLI, even from inside a function.
        ("db/queue.py", "def _planted() -> None:\n    import pgwork.cli\n", "core <- worker <- operator"),
        # The operator reaching the worker through the façade, as `from pgwork import __version__` did.
        ("operator/spec.py", "from pgwork import Queue\n", "the operator never imports the worker"),
        # The worker loading a tool.
        ("worker/options.py", "import pgwork.tools.demo\n", "core <- worker <- operator"),
        # One tool using another.
        ("tools/chaos/workload.py", "from pgwork.tools.lab import stats\n", "each tool stands alone"),
        # The worker needing kopf, which only the operator extra installs.
        ("worker/options.py", "import kopf\n", "without the operator extra"),
        # The library's App reaching into the CLI for the process runner, as it once did.
        ("worker/app.py", "def _planted() -> None:\n    import pgwork.worker.command\n", "never import the worker CLI"),
    ],
)
def test_a_planted_violation_breaks_its_contract(package_copy: Path, module: str, planted: str, broken: str) -> None:
    path = package_copy / "pgwork" / module
    path.write_text(path.read_text() + "\n\n" + planted)
    done = _lint_imports(package_copy)
    assert done.returncode != 0, done.stdout[-3000:]
    report = done.stdout.split("Broken contracts", 1)[-1]
    assert broken in report, done.stdout[-3000:]


def test_a_module_in_no_layer_breaks_the_contract(package_copy: Path) -> None:
    # Every module of pgwork/ must be placed: a new one is a decision about its layer, not a default.
    (package_copy / "pgwork" / "unplaced.py").write_text('"""Belongs to no layer yet."""\n')
    done = _lint_imports(package_copy)
    assert done.returncode != 0
    assert "pgwork.unplaced" in done.stdout


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


NO_TOOLS_NO_HANDLERS = """
import sys
from pgwork.worker.registry import REGISTRY
tools = sorted(m for m in sys.modules if m.startswith("pgwork.tools"))
assert not tools, tools
assert REGISTRY.job_types() == [], REGISTRY.job_types()
print("clean")
"""


def test_importing_the_package_cli_and_operator_loads_no_tool_and_no_handler() -> None:
    done = _fresh(
        "import pgwork, pgwork.cli, pgwork.operator.controller, pgwork.operator.handlers\n" + NO_TOOLS_NO_HANDLERS
    )
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr


def test_building_the_parser_and_its_help_loads_no_tool() -> None:
    # What every `pgwork worker` process does at start: build the whole parser.
    code = (
        "import contextlib, io\n"
        "from pgwork.cli import build_parser, main\n"
        "build_parser()\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "for name in ('bench', 'chaos', 'demo'):\n"
        "    assert name in out.getvalue(), out.getvalue()\n"
    )
    done = _fresh(code + NO_TOOLS_NO_HANDLERS)
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr


def test_a_tools_own_help_loads_that_tool_only_and_still_no_handler() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from pgwork.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['bench', '--help'])\n"
        "assert '--quick' in out.getvalue(), out.getvalue()\n"
        "assert 'pgwork.tools.lab.command' in sys.modules\n"
        "assert not any(m.startswith(('pgwork.tools.chaos', 'pgwork.tools.demo')) for m in sys.modules)\n"
        "from pgwork.worker.registry import REGISTRY\n"
        "assert REGISTRY.job_types() == [], REGISTRY.job_types()\n"
        "print('clean')\n"
    )
    done = _fresh(code)
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr


def test_the_tools_commands_register_no_handler() -> None:
    # Only `pgwork worker --app pgwork.tools.X.app` may register the tools' handlers.
    done = _fresh(
        "import pgwork.tools.lab.command, pgwork.tools.chaos.command, pgwork.tools.demo.command\n"
        "from pgwork.worker.registry import REGISTRY\n"
        "assert REGISTRY.job_types() == [], REGISTRY.job_types()\n"
        "print('clean')\n"
    )
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr
