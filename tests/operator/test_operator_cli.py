from __future__ import annotations

import pytest

from pgwork.cli import main


def test_operator_command_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["operator", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--all-namespaces" in out and "--liveness" in out and "--peering" in out


def test_operator_needs_a_namespace(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert main(["operator"]) == 2
    assert "--namespace: none given and POD_NAMESPACE is unset" in capsys.readouterr().err


def test_namespace_and_all_namespaces_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["operator", "--namespace", "a", "--all-namespaces"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
