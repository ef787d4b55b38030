"""`pgwork ui` from the command line: without the extra it says what to install (one line); a
console that would be open beyond localhost does not start."""

from __future__ import annotations

import sys

import pytest

from pgwork import cli


def test_without_the_extra_it_names_the_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` fails as if not installed
    assert cli.main(["ui"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pgwork ui: needs the 'ui' extra")
    assert err.rstrip().endswith("install it with: pip install 'pgwork[ui]'")


def test_it_refuses_to_serve_beyond_localhost_without_authentication(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("starlette")
    monkeypatch.delenv("PGWORK_UI_USER", raising=False)
    monkeypatch.delenv("PGWORK_UI_PASSWORD", raising=False)
    assert cli.main(["ui", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pgwork ui: --host 0.0.0.0: a console reachable beyond this machine needs authentication")


def test_help_names_the_console(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "operator's console" in capsys.readouterr().out
