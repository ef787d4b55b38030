"""Catalogue rows for a JobQueue whose Secret is missing, lacks its key, holds something that is not
a connection string, or is named so as to reach another namespace: the real kopf operator against
kmock's emulator says so in the JobQueue's status, naming the field and the fix, changes nothing
(no replicas decided on a backlog it cannot read), reads no Secret outside the JobQueue's namespace,
and shows no fragment of the Secret's value anywhere: conditions, events, log, metrics."""

from __future__ import annotations

import json
import logging
import secrets
import string
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg.conninfo
import pytest
from prometheus_client import generate_latest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from tests.support import stories
from tests.support.operator import Emulator, OperatorThread, eventually, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def operator(emulator: Emulator) -> Iterator[OperatorThread]:
    options = OperatorOptions(clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.1)
    for thread in running(emulator, options):
        # Start from a watching operator so each case exercises the create path; the resume path
        # (JobQueues that exist before the operator starts) has its own tests in
        # tests/operator/test_operator_restart.py.
        eventually(
            lambda: any(c["verb"] == "watch" and c["resource"] == "jobqueues" for c in emulator.operator_calls()),
            what="kopf watching jobqueues",
        )
        yield thread


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Kube]:
    c = emulator.client()
    yield c
    c.close()


def _database_condition(client: Kube, namespace: str, name: str) -> dict[str, Any]:
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, name))
            and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "False"
            and b
        ),
        what="DatabaseReachable=False",
    )
    condition = stories.condition(body, "DatabaseReachable")
    assert condition is not None
    return condition


@pytest.mark.parametrize(
    ("secret", "fragment"),
    [
        (None, "Secret {ns}/queue-db key 'dsn' (spec.database.secretName) not found"),
        (
            {"url": "postgresql://app:s3cret-pw@db/app"},
            "Secret {ns}/queue-db key 'dsn' (spec.database.secretName) not found",
        ),
    ],
    ids=["missing Secret", "Secret without the key"],
)
def test_jobqueue_secret_problems_are_reported_in_status(
    operator: OperatorThread, client: Kube, secret: dict[str, str] | None, fragment: str
) -> None:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    # kmock knows a namespace once something lives in it (it cannot create Namespace objects).
    stories.create_secret(client, namespace, "unrelated", "not used", key="x")
    if secret is not None:
        ((key, value),) = secret.items()
        stories.create_secret(client, namespace, "queue-db", value, key=key)
    stories.create_jobqueue(client, namespace, "ocr", stories.spec())
    try:
        condition = _database_condition(client, namespace, "ocr")
        assert condition["reason"] == "SecretMissing"
        assert fragment.format(ns=namespace) in condition["message"]
        assert "kubectl -n" in condition["message"] and "create secret generic queue-db" in condition["message"]
        assert "s3cret-pw" not in condition["message"]
        assert "SecretMissing" in stories.event_reasons(client, namespace, "ocr")
        # Nothing was scaled on a backlog the operator cannot read.
        assert stories.replicas(client, namespace, "ocr") == 1
    finally:
        client.request("DELETE", stories.jobqueues_path(namespace, "ocr"))
        eventually(
            lambda: not client.request("GET", stories.jobqueues_path(namespace)).get("items"),
            what="JobQueue deleted",
        )


# ---------------------------------------------------------------- no fragment of a secret, anywhere

FRAGMENT = 4


def fragments(secret: str) -> set[str]:
    return {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}


def leaks(secret: str, texts: dict[str, str]) -> list[tuple[str, str]]:
    """(where, fragment) for every run of FRAGMENT characters of `secret` found in `texts`."""
    return sorted({(where, f) for where, text in texts.items() for f in fragments(secret) if f in text})


def namespace_apart_from(secret: str) -> str:
    """A fresh namespace made of characters the secret does not hold, so that no fragment found in a
    message can come from the namespace the message names (a random "t-0fbdc234" once matched "234/"
    of the password "1234/v7Kw3Jp" in "t-0fbdc234/queue-db")."""
    alphabet = [c for c in string.ascii_lowercase + string.digits if c not in secret.lower()]
    return "t-" + "".join(secrets.choice(alphabet) for _ in range(8))


def _real(dsn: str, **params: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, **params)


# (id, Secret value, the part that must never show, condition reason). The sensitive parts use
# letter mixes that no message or log line would hold by chance.
HOSTILE_SECRETS: list[tuple[str, Any, str, str]] = [
    ("bare password", "Zq9Xv7Kw3Jp", "Zq9Xv7Kw3Jp", "InvalidDSN"),
    ("bare password with spaces", "Zq9X v7Kw 3Jp", "Zq9X v7Kw 3Jp", "InvalidDSN"),
    ("token", "ghp_Zq9Xv7Kw3JpTyBn", "ghp_Zq9Xv7Kw3JpTyBn", "InvalidDSN"),
    ("base64 token with padding", "WnE5WHY3S3czSnA=", "WnE5WHY3S3czSnA=", "InvalidDSN"),
    # libpq: unexpected spaces found in "Zq9X v7Kw"
    ("URI password with a space", "postgresql://app:Zq9X v7Kw@127.0.0.1:1/app", "Zq9X v7Kw", "InvalidDSN"),
    # libpq reads the first @ as the end of the password: host "v7Kw3Jp@127.0.0.1"
    ("URI password with @", "postgresql://app:Zq9X@v7Kw3Jp@127.0.0.1:1/app", "Zq9X@v7Kw3Jp", "InvalidDSN"),
    # libpq reads up to the / as host:port: host "app", port "Zq9X", dbname "v7Kw3Jp@127.0.0.1:1/app"
    ("URI password with /", "postgresql://app:Zq9X/v7Kw3Jp@127.0.0.1:1/app", "Zq9X/v7Kw3Jp", "InvalidDSN"),
    ("URI password with / after digits", "postgresql://app:1234/v7Kw3Jp@127.0.0.1:1/app", "1234/v7Kw3Jp", "InvalidDSN"),
    ("URI bad percent escape", "postgresql://app:Zq9X%v7Kw@127.0.0.1:1/app", "Zq9X%v7Kw", "InvalidDSN"),
    # libpq: missing "=" after "v7Kw3Jp"
    ("key=value password with a space", "host=127.0.0.1 port=1 password=Zq9X v7Kw3Jp", "Zq9X v7Kw3Jp", "InvalidDSN"),
    ("key=value unterminated quote", "host=127.0.0.1 port=1 password='Zq9Xv7Kw3Jp", "Zq9Xv7Kw3Jp", "InvalidDSN"),
    ("password also in a port", "host=127.0.0.1 port=Zq9Xv7 password=Zq9Xv7", "Zq9Xv7", "InvalidDSN"),
    ("not UTF-8", b"\xff\xfeZq9Xv7Kw3Jp", "Zq9Xv7Kw3Jp", "InvalidDSN"),
    ("empty", "", "", "InvalidDSN"),
    # These parse: libpq then quotes values while connecting, and scrub() must take them out.
    ("password echoed as sslmode", "host=127.0.0.1 port=1 sslmode=Zq9Xv7Kw3Jp password=Zq9Xv7Kw3Jp", "Zq9Xv7Kw3Jp",
     "InvalidDSN"),
    ("unreachable with a password", "postgresql://app:Zq9X%40v7Kw%2F3Jp@127.0.0.1:1/app?connect_timeout=2",
     "Zq9X@v7Kw/3Jp", "Unreachable"),
    ("password as the database name", "REAL:dbname=Zq9Xv7Kw3Jp password=Zq9Xv7Kw3Jp", "Zq9Xv7Kw3Jp", "AccessDenied"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "sensitive", "reason"), [h[1:] for h in HOSTILE_SECRETS],
                         ids=[h[0] for h in HOSTILE_SECRETS])  # fmt: skip
def test_no_fragment_of_a_secret_reaches_status_events_log_or_metrics(
    operator: OperatorThread,
    client: Kube,
    dsn: str,
    caplog: pytest.LogCaptureFixture,
    value: Any,
    sensitive: str,
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    if isinstance(value, str) and value.startswith("REAL:"):
        value = _real(dsn, **dict(p.split("=", 1) for p in value.removeprefix("REAL:").split()))
    namespace = namespace_apart_from(sensitive)
    stories.create_secret(client, namespace, "queue-db", value)
    stories.create_jobqueue(client, namespace, "ocr", stories.spec())
    try:
        condition = _database_condition(client, namespace, "ocr")
        assert condition["reason"] == reason, condition
        assert f"Secret {namespace}/queue-db key 'dsn'" in condition["message"] or reason != "InvalidDSN"
        body = stories.jobqueue(client, namespace, "ocr")
        assert stories.replicas(client, namespace, "ocr") == 1  # nothing scaled on an unread backlog
        clients = operator.options.clients
        assert clients is not None
        texts = {
            "status": json.dumps(body.get("status"), ensure_ascii=False),
            "events": json.dumps(stories.events(client, namespace, "ocr"), ensure_ascii=False),
            "log": "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
            "metrics": generate_latest(clients.metrics.registry).decode(),
        }
        assert texts["log"], "the operator's log was captured"
        assert leaks(sensitive, texts) == []
    finally:
        client.request("DELETE", stories.jobqueues_path(namespace, "ocr"))
        eventually(
            lambda: not client.request("GET", stories.jobqueues_path(namespace)).get("items"),
            what="JobQueue deleted",
        )


# ---------------------------------------------------------------- a Secret in another namespace


def test_a_secret_name_that_climbs_out_of_the_namespace_is_refused_without_a_request(
    emulator: Emulator, operator: OperatorThread, client: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_value = "postgresql://admin:Zq9Xv7Kw3Jp@db.kube-system/admin"
    stories.create_secret(client, "kube-system", "admin-db", secret_value)
    namespace = namespace_apart_from("Zq9Xv7Kw3Jp")
    stories.create_secret(client, namespace, "unrelated", "not used", key="x")
    traversal = "../../kube-system/secrets/admin-db"
    before = len(list(iter(emulator.kmock)))
    stories.create_jobqueue(client, namespace, "ocr", stories.spec(database={"secretName": traversal}))
    try:
        body = eventually(
            lambda: (
                (b := stories.jobqueue(client, namespace, "ocr"))
                and (stories.condition(b, "Ready") or {}).get("reason") == "InvalidSpec"
                and b
            ),
            what="Ready=False InvalidSpec",
        )
        ready = stories.condition(body, "Ready")
        assert ready is not None and ready["status"] == "False"
        assert ready["message"].startswith("spec.database.secretName: ")
        assert "InvalidSpec" in stories.event_reasons(client, namespace, "ocr")
        # Give the timer rounds a chance to misbehave, then look at every request the operator made.
        eventually(lambda: len(list(iter(emulator.kmock))) > before + 5, what="more operator rounds")
        requests = list(iter(emulator.kmock))[before:]
        operator_requests = [r for r in requests if not r.headers.get("User-Agent", "").startswith("pgwork-tests")]
        assert operator_requests, "the operator's requests were recorded"
        for request in operator_requests:
            assert request.namespace in (None, namespace), (request.method, request.url)
            assert "kube-system" not in str(request.url)
            assert request.resource is None or request.resource.plural != "secrets", request.url
        texts = {
            "status": json.dumps(body.get("status")),
            "events": json.dumps(stories.events(client, namespace, "ocr")),
            "log": "\n".join(r.getMessage() for r in caplog.records),
        }
        assert leaks("Zq9Xv7Kw3Jp", texts) == []
        assert stories.deployment(client, namespace, "ocr") is None  # nothing rendered from a refused spec
    finally:
        client.request("DELETE", stories.jobqueues_path(namespace, "ocr"))
        eventually(
            lambda: not client.request("GET", stories.jobqueues_path(namespace)).get("items"),
            what="JobQueue deleted",
        )


def test_the_client_refuses_to_build_a_path_from_an_invalid_name(emulator: Emulator, client: Kube) -> None:
    from pgwork.operator.kube import UnsafeName

    before = len(list(iter(emulator.kmock)))
    for namespace, name in [
        ("team-a", "../../kube-system/secrets/admin-db"),
        ("team-a", ".."),
        ("team-a", "a%2F..%2Fb"),
        ("../kube-system", "db"),
        ("team-a\n", "db"),
    ]:
        with pytest.raises(UnsafeName):
            client.read_secret(namespace, name)
        with pytest.raises(UnsafeName):
            client.get("Deployment", namespace, name)
    assert len(list(iter(emulator.kmock))) == before  # refused before any request
