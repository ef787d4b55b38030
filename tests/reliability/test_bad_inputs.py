"""The bad-input catalogue (docs/reliability.md): each row is a test here.

For every input: what the user sees (one clear line naming the field and the fix, exit code 2 for
commands) and what is kept (no job lost, none corrupted, nothing half-written).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgwork.db import JobRow, Queue, migrate
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.operator.fields import SpecError
from pgwork.operator.spec import parse_spec
from pgwork.tools.chaos.server import PrivateServer
from tests.support.cli import env, one_line_error, pgwork, worker
from tests.support.waiting import stays, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _count(dsn: str, sql: str = "SELECT count(*) FROM pgwork.jobs") -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return int(row[0])


def _job(dsn: str, job_id: int) -> JobRow:
    with Queue(dsn, pool_size=1) as q:
        row = q.job(job_id)
    assert row is not None
    return row


# -- connecting ------------------------------------------------------------------------


def test_malformed_dsn_fails_at_once_without_the_password() -> None:
    started = time.monotonic()
    out = worker(dsn="host=127.0.0.1 port=notaport password=hunter2 dbname=x")
    line = one_line_error(out)
    assert "invalid connection string" in line and "port" in line
    assert "hunter2" not in out.stderr + out.stdout
    # Not retried for a minute as if the server were merely down.
    assert time.monotonic() - started < 20


def test_unreachable_host_is_retried_with_backoff_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgwork.cli", "worker", "--app", "reliability_app", "--id", "w", "--metrics-port", "0"],
        env=env("postgresql://bob:hunter2@127.0.0.1:1/queue"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        text = wait_for(
            lambda: (t := (tmp_path / "worker.log").read_text()).count("retrying in") >= 2 and t,
            20,
            interval=0.2,
            what="two reconnect attempts in the log",
        )
        assert proc.poll() is None, "a worker whose database is down keeps trying; it does not crash-loop"
        assert "cannot connect to bob@127.0.0.1:1/queue" in text and "hunter2" not in text
        # Told to stop before it ever reached the database: it holds nothing, so a clean exit.
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert "hunter2" not in (tmp_path / "worker.log").read_text()


def test_unreachable_host_for_a_command() -> None:
    line = one_line_error(pgwork("stats", dsn="postgresql://bob:hunter2@127.0.0.1:1/queue"))
    assert "cannot connect to bob@127.0.0.1:1/queue" in line and "hunter2" not in line


def test_database_down_at_start_then_up_the_worker_gets_on_with_it(
    private_server: PrivateServer, tmp_path: Path
) -> None:
    with psycopg.connect(private_server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE down_at_start")
    dsn = private_server.dsn("down_at_start")
    migrate(dsn)
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue("echo", {"n": 1})
    private_server.stop()
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgwork.cli", "worker", "--app", "reliability_app", "--id", "w", "--metrics-port", "0"],
        env=env(private_server.url("down_at_start")),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # A worker whose database is down at start keeps trying (within --connect-patience), no crash.
        stays(lambda: proc.poll() is None, duration=2, interval=0.1, what="the worker waiting for its database")
        private_server.start()
        wait_for(
            lambda: _job(dsn, job_id).status == "succeeded", 30, interval=0.2, what="the job done once the server is up"
        )
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    text = (tmp_path / "worker.log").read_text()
    assert "retrying in" in text and private_server.password not in text


WRONG = "Zq9-Xv7-Kw2-Jm5"


def test_wrong_password_is_refused_at_once(private_server: PrivateServer) -> None:
    # No run of 4 characters in common with libpq's or pgwork's text: the scrubber masks every such
    # run of a password (credentials.MIN_FRAGMENT), "password" included for "not-the-password".
    wrong = private_server.url("postgres", password=WRONG)
    started = time.monotonic()
    out = worker(dsn=wrong)
    line = one_line_error(out)
    assert "password authentication failed for user" in line and "retrying will not help" in line
    assert WRONG not in out.stderr + out.stdout
    assert time.monotonic() - started < 20
    stats = one_line_error(pgwork("stats", dsn=wrong))
    assert "password authentication failed" in stats and WRONG not in stats


def test_unmigrated_database(empty_dsn: str) -> None:
    line = one_line_error(worker("--burst", dsn=empty_dsn))
    assert "has no pgwork schema; run `pgwork migrate` first" in line


def test_database_migrated_by_a_newer_pgwork(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pgwork.schema_version (version, name) VALUES (99, 'from_the_future')")
    line = one_line_error(worker("--burst", dsn=dsn))
    assert "schema version 99" in line and "upgrade pgwork" in line
    line = one_line_error(pgwork("migrate", dsn=dsn))
    assert "schema version 99" in line and "upgrade pgwork" in line
    assert _count(dsn, "SELECT max(version) FROM pgwork.schema_version") == 99


def test_sql_ascii_database_is_refused(databases: Any) -> None:
    ascii_dsn = databases.create(encoding="SQL_ASCII")
    line = one_line_error(pgwork("migrate", dsn=ascii_dsn))
    assert "uses encoding SQL_ASCII; pgwork needs UTF8" in line and "CREATE DATABASE" in line
    assert _count(ascii_dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'pgwork'") == 0
    assert "needs UTF8" in one_line_error(worker("--burst", dsn=ascii_dsn))


# -- producing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"doc": {1, 2}}, "payload: is not JSON-serialisable"),
        ({"doc": object()}, "payload: is not JSON-serialisable"),
        ({"score": math.nan}, "payload: is not JSON-serialisable"),
        ([1, 2], "payload: must be a JSON object, got list"),
        ("text", "payload: must be a JSON object, got str"),
        ({"doc": "a\x00b"}, "payload: contains a NUL character"),
    ],
)
def test_payload_not_json(queue: Queue, dsn: str, payload: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment) as caught:
        queue.enqueue("ocr", payload)
    assert caught.value.field == "payload"
    assert _count(dsn) == 0


def test_payload_over_the_configured_limit(dsn: str) -> None:
    with Queue(dsn, max_payload_bytes=1000) as q:
        with pytest.raises(InvalidArgument, match=r"payload: is \d+ bytes, over the limit of 1000"):
            q.enqueue("ocr", {"doc": "x" * 1000})
        # One oversized job in a batch writes none of the batch.
        with pytest.raises(InvalidArgument, match="over the limit"):
            q.enqueue_many([NewJob("ocr", {"n": 1}), NewJob("ocr", {"doc": "x" * 2000}), NewJob("ocr", {"n": 3})])
        assert _count(dsn) == 0
        q.enqueue("ocr", {"doc": "x" * 900})
    assert _count(dsn) == 1


def test_payload_over_the_default_limit(queue: Queue, dsn: str) -> None:
    with pytest.raises(InvalidArgument, match="over the limit of 1048576"):
        queue.enqueue("ocr", {"doc": "x" * (1024 * 1024)})
    assert _count(dsn) == 0


INJECTIONS = [
    "x'); DROP TABLE pgwork.jobs; --",
    "'; DELETE FROM pgwork.job_results WHERE ''='",
    'ocr" OR 1=1 --',
    "$$; TRUNCATE pgwork.jobs; $$",
    "Robert'); DROP TABLE students;-- \\' \u2019 %s %(id)s {}",
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_sql_shaped_strings_are_stored_verbatim_and_harmless(queue: Queue, dsn: str, text: str) -> None:
    queue.enqueue("ocr", {"doc": 1}, key="sentinel")
    job_id = queue.enqueue(text, {text: text, "nested": [text]}, key=text)
    assert [(s.job_type, s.ready) for s in queue.stats([text])] == [(text, 1)]
    row = _job(dsn, job_id)
    assert row.job_type == text and row.idempotency_key == text
    assert row.payload == {text: text, "nested": [text]}
    (claimed,) = queue.claim("w", job_types=[text])
    queue.succeed(claimed.lease, {"echo": text})
    result = queue.result(text)
    assert result is not None and result.result == {"echo": text}
    # Everything else is where it was.
    assert _count(dsn) == 2 and _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 1


def test_sql_shaped_strings_through_the_command_line(dsn: str) -> None:
    text = INJECTIONS[0]
    out = pgwork("enqueue", text, "--key", text, "--payload", json.dumps({"q": text}), dsn=dsn)
    assert out.returncode == 0, out.stderr
    row = _job(dsn, int(out.stdout))
    assert (row.job_type, row.idempotency_key, row.payload) == (text, text, {"q": text})
    assert text in pgwork("stats", dsn=dsn).stdout


# -- handlers --------------------------------------------------------------------------


def _run_one(dsn: str, job_type: str, **kwargs: Any) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Enqueue one `job_type` job and an `echo` behind it; run a burst worker; the first job's row."""
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue(job_type, {"n": 1}, **kwargs)
        echo_id = q.enqueue("echo", {"n": 2}, priority=200)
    out = worker("--burst", dsn=dsn)
    assert out.returncode == 0, out.stderr
    # The worker survived the bad job and went on to the next one.
    assert _job(dsn, echo_id).status == "succeeded", out.stderr
    return _job(dsn, job_id), out


def test_handler_exception_whose_str_raises(dsn: str) -> None:
    row, out = _run_one(dsn, "unprintable", max_attempts=1)
    assert row.status == "dead" and row.attempt_count == 1
    assert "UnprintableError" in row.last_error
    assert "runner failed" not in out.stderr


def test_handler_exception_whose_str_raises_is_retried(dsn: str) -> None:
    row, _ = _run_one(dsn, "unprintable", max_attempts=3)
    assert row.status == "pending" and row.attempt_count == 1 and "UnprintableError" in row.last_error


@pytest.mark.parametrize("job_type", ["not_json", "nan"])
def test_result_not_json_serialisable(dsn: str, job_type: str) -> None:
    row, _ = _run_one(dsn, job_type, max_attempts=5)
    # Retrying cannot make the handler return JSON: dead at once, with the reason.
    assert row.status == "dead" and row.attempt_count == 1
    assert "not JSON" in row.last_error and "return JSON types only" in row.last_error
    assert _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 1  # only the echo's


def test_handler_raising_keyboard_interrupt_does_not_stop_the_worker(dsn: str) -> None:
    row, _ = _run_one(dsn, "interrupt", max_attempts=1)
    assert row.status == "dead" and "KeyboardInterrupt" in row.last_error


def test_job_type_no_worker_serves_stays_pending_and_visible(dsn: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        orphan = q.enqueue("translate", {"doc": 1})
    out = worker("--burst", dsn=dsn)
    assert out.returncode == 0, out.stderr
    row = _job(dsn, orphan)
    assert row.status == "pending" and row.attempt_count == 0 and row.last_error is None
    stats = json.loads(pgwork("stats", "--json", dsn=dsn).stdout)
    assert [(s["job_type"], s["ready"]) for s in stats] == [("translate", 1)]
    line = one_line_error(worker("--burst", "--job-types", "translate", dsn=dsn))
    assert "--job-types: no handler registered for translate" in line
    assert _job(dsn, orphan).status == "pending"


# -- command-line values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--lease", "0"], "--lease: '0' is under one second"),
        (["--lease", "-5s"], "--lease:"),
        (["--lease", "30s", "--heartbeat", "11s"], "--heartbeat: 11s is more than a third of the 30s lease"),
        (["--heartbeat", "0"], "--heartbeat: '0' must be above zero"),
        (["--concurrency", "0"], "--concurrency: 0 is out of range (use 1..1000)"),
        (["--batch", "0"], "--batch: 0 is out of range (use 1..10000)"),
        (["--concurrency", "many"], "--concurrency: 'many' is not a whole number"),
        (["--app", "no_such_module_xyz"], "--app: cannot import 'no_such_module_xyz'"),
    ],
)
def test_worker_values_out_of_range(dsn: str, args: list[str], fragment: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue("echo", {"n": 1})
    line = one_line_error(worker("--burst", *args, dsn=dsn))
    assert fragment in line, line
    assert _job(dsn, job_id).status == "pending"


# -- JobQueue specs --------------------------------------------------------------------


def _spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "database": {"secretName": "queue-db"},
        "jobTypes": ["ocr"],
        "worker": {"image": "registry.example/worker:1", "app": "myapp.jobs"},
    }
    for path, value in changes.items():
        node = spec
        *parents, leaf = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return spec


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"scaling__minReplicas": 5, "scaling__maxReplicas": 2}, "spec.scaling.minReplicas", "is above maxReplicas"),
        ({"reaper__schedule": "every minute"}, "spec.reaper.schedule", "has 2 fields, a schedule has 5"),
        ({"reaper__schedule": "61 * * * *"}, "spec.reaper.schedule", "minute 61 is outside 0-59"),
        ({"retention__schedule": "@sometimes"}, "spec.retention.schedule", "unknown macro"),
        ({"database": {}}, "spec.database.secretName", "is required"),
        ({"database__secretKey": ""}, "spec.database.secretKey", "non-empty"),
    ],
)
def test_jobqueue_spec_errors_name_the_field(changes: dict[str, Any], field: str, fragment: str) -> None:
    parse_spec(_spec())  # the base spec is fine
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(**changes))
    assert caught.value.field == field, caught.value.field
    assert fragment in str(caught.value)
