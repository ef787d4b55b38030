"""The tool installer CI calls: valid shell, installs into the gitignored tools/bin, and the tools
it installs are the ones the tests find."""

from __future__ import annotations

import pytest

from tests.support.ship import ROOT, run, tool

SCRIPT = ROOT / ".ci" / "install-tools.sh"


def test_script_is_valid_bash() -> None:
    proc = run(["bash", "-n", str(SCRIPT)])
    assert proc.returncode == 0, proc.stderr


def test_tools_directory_is_gitignored() -> None:
    assert "/tools/" in (ROOT / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize(("name", "version_args", "expected"), [("helm", ["version", "--short"], "v4.")])
def test_installed_helm_is_v4(name: str, version_args: list[str], expected: str) -> None:
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} is not installed: run .ci/install-tools.sh")
    proc = run([path, *version_args])
    assert proc.returncode == 0 and proc.stdout.startswith(expected), proc.stdout + proc.stderr


def test_rerun_is_a_no_op_when_tools_are_present() -> None:
    if tool("helm") is None or tool("promtool") is None or not (ROOT / "tools" / "bin" / "kubectl").exists():
        pytest.skip("tools not installed yet: run .ci/install-tools.sh")
    proc = run(["bash", str(SCRIPT)])
    assert proc.returncode == 0, proc.stderr
    assert "already" in proc.stdout
    assert "promtool: already installed" in proc.stdout
