"""Least privilege and secrets: workers run under a role that can only work the queue, passwords
never reach logs, errors or status, and the operator takes credentials only from Secrets."""

from __future__ import annotations

import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg import sql

from pgwork.credentials import redact
from pgwork.db import Queue, migrate
from pgwork.errors import Unreachable
from pgwork.operator import render
from pgwork.operator.db import explain
from pgwork.operator.spec import parse_spec
from pgwork.tools.chaos.server import PrivateServer
from tests.support.cli import env, one_line_error, pgwork
from tests.support.manifests import env_entries
from tests.support.waiting import wait_for

OPERATOR_DIR = Path(__file__).resolve().parents[2] / "pgwork" / "operator"


@dataclass(frozen=True)
class Database:
    owner_dsn: str  # the migrating role (superuser here)
    worker_url: str  # the least-privilege worker role, with its password
    worker_password: str
    role: str


@pytest.fixture
def database(private_server: PrivateServer) -> Iterator[Database]:
    name = f"sec_{uuid.uuid4().hex[:8]}"
    role = f"worker_{uuid.uuid4().hex[:8]}"
    password = secrets.token_urlsafe(16)
    with psycopg.connect(private_server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
    owner = private_server.dsn(name)
    migrate(owner)
    out = pgwork("grant", role, "--profile", "worker", dsn=private_server.url(name))
    assert out.returncode == 0, out.stderr
    yield Database(owner, private_server.url(name, user=role, password=password), password, role)
    with psycopg.connect(private_server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _worker_cmd(worker_id: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pgwork.cli",
        "-v",  # debug logging: the most a log could ever show
        "worker",
        "--app",
        "reliability_app",
        "--id",
        worker_id,
        "--metrics-port",
        "0",
        "--lease",
        "3s",
        *extra,
    ]


@pytest.mark.slow
def test_worker_runs_under_the_worker_profile_and_can_do_nothing_else(database: Database) -> None:
    with Queue(database.owner_dsn, pool_size=1) as q:
        ok = q.enqueue("echo", {"n": 1})
        bad = q.enqueue("not_json", {"n": 2})
    out = subprocess.run(
        _worker_cmd("least-privilege", "--burst"),
        env=env(database.worker_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    with Queue(database.owner_dsn, pool_size=1) as q:
        assert q.job(ok).status == "succeeded"
        assert q.job(bad).status == "dead"
        result = q.result(q.job(ok).idempotency_key)
        assert result is not None and result.produced_by == "least-privilege"
    assert database.worker_password not in out.stdout + out.stderr
    # The pod's migrate init container runs under the worker role: a no-op on a current schema.
    migrated = pgwork("migrate", dsn=database.worker_url)
    assert migrated.returncode == 0 and "already up to date" in migrated.stdout, migrated.stderr
    # What the worker role cannot do (the reaper's and the maintainer's work), as the user would see it.
    for args in (["reap"], ["cancel", "999"], ["prune", "--older-than", "1s"], ["retry", "999"]):
        line = one_line_error(pgwork(*args, dsn=database.worker_url))
        assert "permission denied" in line and "pgwork grant ROLE --profile" in line, line
    with psycopg.connect(database.worker_url, autocommit=True) as conn:
        for statement in (
            "UPDATE pgwork.jobs SET lease_owner = 'evil', lease_token = gen_random_uuid()",
            "UPDATE pgwork.jobs SET status = 'succeeded', completed_at = now()",
            "UPDATE pgwork.jobs SET attempt_count = 0",
            "INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result) "
            "VALUES ('k', 1, 'echo', 'evil', '{}')",
            "SELECT payload FROM pgwork.jobs",
            "SELECT result FROM pgwork.job_results",
            "SELECT * FROM pgwork.reap(1000)",
            "CREATE FUNCTION pgwork.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "DELETE FROM pgwork.jobs",
            "DELETE FROM pgwork.job_results",
            "UPDATE pgwork.job_results SET result = '{}'",
            "UPDATE pgwork.jobs SET payload = '{}'",
            "UPDATE pgwork.jobs SET idempotency_key = 'other'",
            "UPDATE pgwork.jobs SET job_type = 'other', priority = 0",
            "UPDATE pgwork.jobs SET max_attempts = 100",
            "TRUNCATE pgwork.jobs",
            "DROP TABLE pgwork.jobs",
            "ALTER TABLE pgwork.jobs DROP CONSTRAINT jobs_running_leased",
            "CREATE TABLE pgwork.mine (x int)",
            "INSERT INTO pgwork.schema_version (version, name) VALUES (99, 'x')",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[arg-type]
    with psycopg.connect(database.owner_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.job_results").fetchone()
    assert row is not None and row[0] == 1


def test_worker_with_only_the_reader_profile_stops_with_a_clear_line(
    private_server: PrivateServer, database: Database
) -> None:
    dbname = psycopg.conninfo.conninfo_to_dict(database.owner_dsn)["dbname"]
    reader = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'reader-pw-123'").format(sql.Identifier(reader)))
    try:
        assert pgwork("grant", reader, "--profile", "reader", dsn=private_server.url(str(dbname))).returncode == 0
        with Queue(database.owner_dsn, pool_size=1) as q:
            job_id = q.enqueue("echo", {"n": 1})
        out = subprocess.run(
            _worker_cmd("reader", "--burst"),
            env=env(private_server.url(str(dbname), user=reader, password="reader-pw-123")),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        line = one_line_error(out)
        assert "permission denied for function claim" in line and "--profile" in line
        assert "reader-pw-123" not in out.stdout + out.stderr
        with Queue(database.owner_dsn, pool_size=1) as q:
            assert q.job(job_id).status == "pending"
    finally:
        with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(reader)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(reader)))


@pytest.mark.slow
def test_reaper_profile_runs_the_cronjobs_and_nothing_else(private_server: PrivateServer, database: Database) -> None:
    dbname = str(psycopg.conninfo.conninfo_to_dict(database.owner_dsn)["dbname"])
    reaper = f"reaper_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'reaper-pw-123'").format(sql.Identifier(reaper)))
    try:
        out = pgwork("grant", reaper, "--profile", "reaper", dsn=private_server.url(dbname))
        assert out.returncode == 0 and "reader + reaper" in out.stdout, out.stderr
        url = private_server.url(dbname, user=reaper, password="reaper-pw-123")
        # What the reaper and prune CronJobs run.
        assert pgwork("reap", dsn=url).returncode == 0
        pruned = pgwork("prune", "--older-than", "30d", dsn=url)
        assert pruned.returncode == 0, pruned.stderr
        for args in (["retry", "1"], ["cancel", "1"], ["enqueue", "echo"]):
            line = one_line_error(pgwork(*args, dsn=url))
            assert "permission denied" in line and "--profile" in line, line
        assert pgwork("migrate", dsn=url).returncode == 0
    finally:
        with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(reaper)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(reaper)))


@pytest.mark.parametrize(
    ("role", "words"),
    [
        ("public", "PUBLIC means every role"),
        ('"public"', "is quoted"),
        ("r" * 64, "PostgreSQL cuts names to 63"),
        ("pg_monitor", "reserved pg_*"),
        ("no_such_role_here", "there is no role"),
        ("postgres", "superuser"),
    ],
)
def test_grant_refuses_grantees_in_one_line(
    private_server: PrivateServer, database: Database, role: str, words: str
) -> None:
    dbname = str(psycopg.conninfo.conninfo_to_dict(database.owner_dsn)["dbname"])
    line = one_line_error(pgwork("grant", role, "--profile", "worker", dsn=private_server.url(dbname)))
    assert line.startswith("pgwork grant: role: ") and words in line, line


def test_password_stays_out_of_logs_through_a_database_restart(
    private_server: PrivateServer, database: Database, tmp_path: Path
) -> None:
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            _worker_cmd("restart-survivor", "--poll", "0.2s"),
            env=env(database.worker_url),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            with Queue(database.owner_dsn, pool_size=1) as q:
                first = q.enqueue("echo", {"n": 1})
            _wait_for(database.owner_dsn, first, "succeeded")
            private_server.restart()
            with Queue(database.owner_dsn, pool_size=1) as q:
                second = q.enqueue("echo", {"n": 2})
            _wait_for(database.owner_dsn, second, "succeeded")
            assert proc.poll() is None, "the worker survived the restart"
            proc.terminate()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log_path.read_text()
    assert "server closed the connection" in text or "terminating connection" in text or "failed" in text, text
    assert database.worker_password not in text
    assert private_server.password not in text


def _wait_for(dsn: str, job_id: int, status: str, timeout: float = 30) -> None:
    def reached() -> bool:
        with Queue(dsn, pool_size=1, check=False) as q:
            row = q.job(job_id)
        return row is not None and row.status == status

    wait_for(reached, timeout, interval=0.2, what=f"job {job_id} becoming {status}")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgresql://u:s3cret@h/db", "s3cret"),
        ("postgres://u:s3cret@h:5/d?sslmode=require", "s3cret"),
        ("postgresql://u:p%40ss%2Fw0rd@h/db", "p%40ss%2Fw0rd"),
        ("postgresql://u@h/db?password=s3cret&sslmode=require", "s3cret"),
        ("host=h user=u password=s3cret dbname=d", "s3cret"),
        ("host=h password='two words' user=u", "two words"),
        ("host=h password=two\\ words user=u", "words"),
        ("host=h PASSWORD = s3cret", "s3cret"),
        ('cannot connect: "postgresql://u:s3cret@h/db" refused', "s3cret"),
    ],
)
def test_redact_hides_every_password_shape(text: str, secret: str) -> None:
    assert secret not in redact(text)


def test_operator_status_never_carries_the_password(private_server: PrivateServer) -> None:
    for dsn, secret in (
        ("postgresql://app:hunter2-secret@127.0.0.1:1/queue", "hunter2-secret"),
        (private_server.url("postgres", password="wrong-pw-987"), "wrong-pw-987"),
        ("host=127.0.0.1 port=notaport password=hunter2-secret", "hunter2-secret"),
    ):
        with pytest.raises(Unreachable) as caught:
            Queue(dsn, pool_size=1)
        problem = explain(caught.value)
        assert secret not in problem.message and problem.message
        assert secret not in str(caught.value)


def test_operator_takes_credentials_only_from_secrets() -> None:
    body = {
        "apiVersion": "pgwork.dev/v1alpha1",
        "kind": "JobQueue",
        "metadata": {"name": "ocr", "namespace": "docs", "uid": "u-1", "generation": 1},
        "spec": {
            "database": {"secretName": "queue-db", "secretKey": "url"},
            "jobTypes": ["ocr"],
            "worker": {"image": "registry.example/worker:1", "app": "myapp.jobs"},
        },
    }
    parse_spec(body["spec"])
    manifests = render.render_all(body)
    with_containers = [m for m in manifests if env_entries(dict(m))]
    assert {m["kind"] for m in with_containers} >= {"Deployment", "CronJob"}
    for manifest in with_containers:
        database_env = [e for e in env_entries(dict(manifest)) if e["name"] == "DATABASE_URL"]
        # Every container that needs the database (the worker, the migrating init container,
        # the CronJobs) reads it from the Secret, never from a literal value.
        assert database_env, manifest["kind"]
        for entry in database_env:
            assert entry == {
                "name": "DATABASE_URL",
                "valueFrom": {"secretKeyRef": {"name": "queue-db", "key": "url"}},
            }, manifest["kind"]
        text = yaml.safe_dump(dict(manifest))
        assert "postgres://" not in text and "postgresql://" not in text and "password" not in text.lower()
    # The CRD offers no field that could hold a DSN or password in the JobQueue itself.
    crd = yaml.safe_load((OPERATOR_DIR / "crd.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    # Secret references too: {name, key}
    roles = {"migrationsSecret", "workersSecret", "maintenanceSecret", "listenSecret", "schedulesSecret"}
    database = schema["properties"]["database"]["properties"]
    assert set(database) <= {"secretName", "secretKey", "migrate", "pooler", *roles}
    assert database["pooler"]["enum"] == ["none", "transaction"]  # a mode, never a connection string
    for role in roles:
        assert set(schema["properties"]["database"]["properties"][role]["properties"]) == {"name", "key"}
    assert "password" not in yaml.safe_dump(schema).lower().replace("never written here", "")
