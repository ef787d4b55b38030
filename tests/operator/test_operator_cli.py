from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pgwork.cli import main
from tests.support import stories
from tests.support.operator import Emulator, eventually, record_calls


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


@pytest.mark.slow
def test_pgwork_operator_command_runs_with_a_kubeconfig(tmp_path: Path, dsn: str) -> None:
    """The real `pgwork operator` process, logging in from a kubeconfig (as outside a cluster)."""
    emulator = Emulator().start()
    client = emulator.client()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kmock", "cluster": {"server": emulator.url}}],
                "users": [{"name": "tester", "user": {"token": "not-checked"}}],
                "contexts": [
                    {"name": "kmock", "context": {"cluster": "kmock", "user": "tester", "namespace": "team-a"}}
                ],
                "current-context": "kmock",
            }
        )
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "POD_NAMESPACE": "team-a",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "pgwork.cli", "operator", "--standalone", "--metrics-port", "0", "--liveness", ""],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stories.create_secret(client, "team-a", "queue-db", dsn)
        stories.create_jobqueue(client, "team-a", "ocr", stories.spec())
        deployment = eventually(lambda: stories.deployment(client, "team-a", "ocr"), what="Deployment")
        assert deployment["metadata"]["ownerReferences"][0]["name"] == "ocr"
        requests = {c["agent"] for c in emulator.operator_calls()}
        assert any(a.startswith("pgwork-operator/") for a in requests)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        client.close()
        record_calls(emulator.operator_calls())
        emulator.stop()
    assert process.returncode == 0, output[-3000:]
