"""The style gates run with the suite, so the README's one test command checks them too."""

from __future__ import annotations

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
