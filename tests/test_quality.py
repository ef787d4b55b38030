"""The style gates run with the suite, so the README's one test command checks them too."""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _paths() -> list[str]:
    return [p for p in ("pgwork", "tests", "bench", "scripts") if (ROOT / p).exists()]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_check_is_clean() -> None:
    out = _run("ruff", "check", *_paths())
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_clean() -> None:
    out = _run("ruff", "format", "--check", *_paths())
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_mypy_strict_on_the_package() -> None:
    if shutil.which("mypy") is None and _run("mypy", "--version").returncode != 0:
        pytest.skip("mypy is not installed: pip install -e '.[test]'")
    out = _run("mypy")
    assert out.returncode == 0, out.stdout + out.stderr


# The test kit: helpers live in tests/support (by subject), no test imports another test, and every
# test folder is a package, so each module has one name and none can shadow another (or the stdlib).
TESTS = ROOT / "tests"
APPS = TESTS / "support" / "apps"  # apps handed to `--app` by module name, not a package


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if APPS not in p.parents and "__pycache__" not in p.parts)


@functools.cache
def _imported(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module `path` imports (anywhere in it, inside functions too), resolved to its full name."""
    package = ".".join(path.relative_to(root).parent.parts)
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def refused_imports(path: Path, local_names: set[str], root: Path = ROOT) -> list[str]:
    """What a test module may not import, one line each: another test folder's module, a conftest,
    a test module, or a test folder's file by its bare name (as sys.path tricks allowed before)."""
    refused: dict[int, str] = {}
    for line, name in _imported(path, root):
        parts = name.split(".")
        other_folder = parts[0] == "tests" and len(parts) > 1 and parts[1] != "support"
        a_test = parts[-1].startswith("test_") or parts[-1] == "conftest"
        if other_folder or a_test or (len(parts) == 1 and name in local_names):
            refused.setdefault(line, f"{path.relative_to(root)}:{line} imports {name}")
    return list(refused.values())


def test_no_test_imports_another_test() -> None:
    modules = _test_modules()
    # A bare `import workerkit` reaching a module of a test folder through sys.path.
    local = {p.stem for p in modules if p.stem != "__init__" and "support" not in p.relative_to(TESTS).parts}
    refused = [r for p in modules for r in refused_imports(p, local)]
    assert refused == [], "put shared helpers in tests/support/ (by subject):\n" + "\n".join(refused)


def test_the_rule_catches_imports_between_tests(tmp_path: Path) -> None:
    planted = tmp_path / "tests" / "core" / "test_planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(
        "from tests.core.test_migrate import V1_JOBS\nimport workerkit\nfrom tests.support.db import Databases\n\n"
        "def f():\n    from . import conftest\n"
    )
    assert [r.split(" imports ")[1] for r in refused_imports(planted, {"workerkit"}, tmp_path)] == [
        "tests.core.test_migrate",
        "workerkit",
        "tests.core",
    ]


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in _test_modules()}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert missing == [], f"add an __init__.py to {missing}"


SHIM_TEST = TESTS / "core" / "test_pure.py"  # checks that the shim still re-exports pgwork.db


def test_the_package_and_its_tests_import_pgwork_db_not_the_shim() -> None:
    # pgwork.queue stays for users (`from pgwork.queue import Queue`); pgwork's own code and tests
    # import pgwork.db, so the shim has no reader inside the repository but its own test.
    files = [p for p in [*(ROOT / "pgwork").rglob("*.py"), *_test_modules()] if p != SHIM_TEST]
    using = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in files
        for line, name in _imported(p, ROOT)
        if name == "pgwork.queue" or name.startswith("pgwork.queue.")
    ]
    assert using == [], "import pgwork.db, not the pgwork.queue shim: " + ", ".join(using)
