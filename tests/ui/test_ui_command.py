"""`pgwork ui` from the command line: without the extra it says what to install (one line); a
console that would be open beyond localhost does not start."""

from __future__ import annotations

import pytest

from pgwork import cli
from pgwork.ui import command


def test_without_the_extra_it_names_the_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(command, "missing_extra", lambda: True)
    assert cli.main(["ui"]) == 2
    err = capsys.readouterr().err
    assert err == "pgwork ui needs the ui extra: pip install 'pgwork[ui]' (starlette, jinja2, uvicorn)\n"


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
