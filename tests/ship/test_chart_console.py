"""The chart's optional console (`console.enabled`): off by default; a Deployment + Service that run
`pgwork ui` with the flags the CLI accepts, authentication always on (basic from a Secret, or a
trusted proxy header), the database role's credentials from a Secret, no Kubernetes token."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from pgwork.ui import command
from tests.support.ship import CHART, helm_template, helm_template_error

PROXY = CHART / "ci" / "console-proxy-values.yaml"


def _console(*args: str) -> list[dict[str, Any]]:
    return [
        o
        for o in helm_template(*args)
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "console"
    ]


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def test_off_by_default() -> None:
    assert _console() == []


def test_basic_auth_from_a_secret_and_the_database_from_another() -> None:
    objects = _console("--set", "console.enabled=true")
    assert sorted(o["kind"] for o in objects) == ["Deployment", "Service"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert container["args"][:4] == ["ui", "--host=0.0.0.0", "--port=8080", "--auth=basic"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["DATABASE_URL"] == {"name": "pgwork-console-database", "key": "dsn"}
    assert env["PGWORK_UI_USER"] == {"name": "pgwork-console-auth", "key": "user"}
    assert env["PGWORK_UI_PASSWORD"] == {"name": "pgwork-console-auth", "key": "password"}
    assert all("value" not in e for e in container["env"])  # no secret in the manifest itself
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "console"
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_operator_service_never_selects_console_pods() -> None:
    objects = helm_template("--set", "console.enabled=true")
    metrics = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"].endswith("-metrics")]
    assert metrics[0]["spec"]["selector"]["app.kubernetes.io/component"] == "operator"


def test_behind_a_proxy_with_polling_and_no_listen() -> None:
    args = _container(_console("-f", str(PROXY)))["args"]
    assert "--auth=proxy" in args and "--user-header=X-Auth-Request-User" in args
    assert "--live=poll" in args and "--no-listen" in args


@pytest.mark.parametrize("values", [("--set", "console.enabled=true"), ("-f", str(PROXY))])
def test_the_arguments_are_accepted_by_pgwork_ui(values: tuple[str, str]) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    command.configure(sub.add_parser("ui"))
    parsed = parser.parse_args(_container(_console(*values))["args"])
    assert parsed.host == "0.0.0.0" and parsed.auth in ("basic", "proxy")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("console.auth.mode=none", "at '/console/auth/mode'"),
        ("console.live=websocket", "at '/console/live'"),
        ("console.auth.header=X Bad", "at '/console/auth/header'"),
        ("console.port=80", "at '/console/port'"),
    ],
)
def test_values_schema_refuses_an_open_console(setting: str, message: str) -> None:
    assert message in helm_template_error("--set", "console.enabled=true", "--set", setting)


def test_basic_auth_needs_its_secret() -> None:
    err = helm_template_error("--set", "console.enabled=true", "--set", "console.auth.secretName=")
    assert "console.auth.mode=basic needs console.auth.secretName" in err
