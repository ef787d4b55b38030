"""Bad rows and bad results (docs/reliability.md, bad-input catalogue): one row nobody can read, or
one result nobody can store, never stops a worker, never stays `running`, never blocks the jobs
behind it.

The rows are inserted by plain SQL, which the schema allows: pgwork's own enqueue refuses these
values, but a producer writing to the table directly (or a migration, or a restore) does not."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.decoding import Undecodable
from tests.support.cli import pgwork, worker

DEEP_JSON = '{"doc": ' + "[" * 5000 + "]" * 5000 + "}"
LONG_NUMBER = '{"n": 1' + "0" * 5000 + "}"


def _insert(dsn: str, *, job_type: str = "echo", payload: str = "{}", trace_context: str = "{}", **cols: Any) -> int:
    """One job row written as plain SQL would, bypassing every check pgwork makes at enqueue."""
    cols.setdefault("idempotency_key", f"raw-{job_type}-{len(payload)}-{len(trace_context)}-{len(cols)}")
    names = ["job_type", "payload", "trace_context", *cols]
    values = [job_type, payload, trace_context, *cols.values()]
    placeholders = ", ".join(["%s"] * len(names))
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f"INSERT INTO pgwork.jobs ({', '.join(names)}) VALUES ({placeholders}) RETURNING id",  # type: ignore[arg-type]
            values,
        ).fetchone()
    assert row is not None
    return int(row[0])


def _row(dsn: str, job_id: int) -> SimpleNamespace:
    """The columns a test checks, read on a plain connection (no decoding loaders), as attributes."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "SELECT status::text, attempt_count, last_error, lease_owner FROM pgwork.jobs WHERE id = %s", [job_id]
        )
        row = cur.fetchone()
    assert row is not None
    return SimpleNamespace(**dict(zip(("status", "attempt_count", "last_error", "lease_owner"), row, strict=True)))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (DEEP_JSON, "nested too deeply"),
        (LONG_NUMBER, "a number too long for Python"),
    ],
    ids=["nested 5000 deep", "5001-digit number"],
)
@pytest.mark.parametrize("batch", ["1", "3"])
def test_undecodable_payload_goes_dead_and_the_worker_goes_on(dsn: str, payload: str, reason: str, batch: str) -> None:
    bad = _insert(dsn, payload=payload, priority=0, max_attempts=5)
    with Queue(dsn, pool_size=1) as q:
        after = [q.enqueue("echo", {"n": n}, priority=200) for n in range(2)]
    out = worker("--burst", "--batch", batch, dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    row = _row(dsn, bad)
    # It will never decode: dead at the first attempt, not retried four more times.
    assert row.status == "dead" and row.attempt_count == 1
    assert "cannot be read" in row.last_error and reason in row.last_error, row.last_error
    assert "pgwork retry" in row.last_error
    for job_id in after:
        assert _row(dsn, job_id).status == "succeeded", out.stderr


def test_undecodable_trace_context_is_ignored_and_the_job_runs(dsn: str) -> None:
    job_id = _insert(dsn, trace_context=DEEP_JSON, payload='{"n": 1}')
    mistyped = _insert(dsn, trace_context='{"traceparent": 7}', payload='{"n": 2}')
    out = worker("--burst", dsn=dsn)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert _row(dsn, job_id).status == "succeeded"
    assert _row(dsn, mistyped).status == "succeeded"
    assert "ignoring its trace_context" in out.stderr


def test_queue_reads_undecodable_rows_as_markers(dsn: str) -> None:
    job_id = _insert(dsn, payload=DEEP_JSON, trace_context=LONG_NUMBER)
    with Queue(dsn, pool_size=1) as q:
        row = q.job(job_id)
        assert row is not None
        assert isinstance(row.payload, Undecodable) and "nested too deeply" in row.payload.reason
        assert isinstance(row.trace_context, Undecodable)
        # The claim commits and comes back: nothing raises between the commit and the caller.
        (claimed,) = q.claim("w", job_types=["echo"])
        assert claimed.id == job_id and isinstance(claimed.payload, Undecodable)


@pytest.mark.slow
def test_timestamps_python_cannot_hold_do_not_stop_the_commands(dsn: str) -> None:
    """A dead job completed in the year 20000 and a running job started then: `pgwork dead`,
    `running` and `stats` still answer, in tables and in strict JSON."""
    dead = _insert(
        dsn, job_type="odd", status="dead", completed_at="20000-01-01 00:00:00+00", last_error="from the future"
    )
    _insert(
        dsn,
        job_type="odd",
        status="running",
        started_at="20000-01-01 00:00:00+00",
        lease_owner="w",
        lease_token="00000000-0000-0000-0000-000000000001",
        lease_expires_at="20000-01-01 00:00:00+00",
        heartbeat_at="20000-01-01 00:00:00+00",
        idempotency_key="running-odd",
    )
    for command in ("dead", "running", "stats"):
        table = pgwork(command, dsn=dsn)
        assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr
        assert "odd" in table.stdout
        as_json = pgwork(command, "--json", dsn=dsn)
        assert as_json.returncode == 0, as_json.stderr
        rows = json.loads(as_json.stdout, parse_constant=_refuse_constant)
        assert rows and rows[0]["job_type"] == "odd"
    assert "undecodable" in pgwork("dead", dsn=dsn).stdout
    assert str(dead) in pgwork("dead", dsn=dsn).stdout


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"--json printed {name}, which is not JSON")


# -- results nobody can store ------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_type", "fragment"),
    [
        ("deep_result", "nested more than 100 levels"),
        ("huge_result", "over the limit of 16777216"),
        ("infinite_result", "JSON has no NaN or Infinity"),
        ("nul_result", "contains a NUL character"),
        ("not_json", "is not JSON-serialisable"),
    ],
)
def test_result_that_cannot_be_stored_fails_the_job_at_once(dsn: str, job_type: str, fragment: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue(job_type, {"n": 1}, max_attempts=5)
        echo = q.enqueue("echo", {"n": 2}, priority=200)
    out = worker("--burst", dsn=dsn, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    row = _row(dsn, job_id)
    assert row.status == "dead" and row.attempt_count == 1, row
    assert "result" in row.last_error and fragment in row.last_error, row.last_error
    assert _row(dsn, echo).status == "succeeded"


def test_the_six_characters_backslash_u0000_are_text_everywhere(dsn: str) -> None:
    text = "a\\u0000b"  # backslash, u, 0, 0, 0, 0: not a NUL
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue("escaped_nul_result", {"text": text}, key=text)
        assert q.job(job_id).payload == {"text": text}
    out = pgwork("enqueue", "echo", "--payload", json.dumps({"text": text}), "--key", "k" + text, dsn=dsn)
    assert out.returncode == 0, out.stderr
    run = worker("--burst", dsn=dsn)
    assert run.returncode == 0, run.stderr
    with Queue(dsn, pool_size=1) as q:
        assert _row(dsn, job_id).status == "succeeded"
        stored = q.result(text)
        assert stored is not None and stored.result == {"text": text}
        echoed = q.job(int(out.stdout))
        assert echoed is not None and echoed.payload == {"text": text} and echoed.status == "succeeded"


# -- what handlers raise -------------------------------------------------------------------


def test_handler_exception_text_is_redacted_before_it_is_stored_or_logged(dsn: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue("leaky", {"n": 1}, max_attempts=1)
    out = worker("--burst", dsn=dsn)
    assert out.returncode == 0, out.stderr
    row = _row(dsn, job_id)
    assert row.status == "dead"
    for secret in ("s3cr3t-pw", "hunter2"):
        assert secret not in row.last_error and secret not in out.stderr + out.stdout
    assert "postgresql://billing:***@" in row.last_error and "password=***" in row.last_error
    assert "ConnectionError" in out.stderr  # still logged, just without the secrets


def test_handler_exception_with_nul_and_surrogate_is_still_recorded(dsn: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        job_id = q.enqueue("nul_error", {"n": 1}, max_attempts=1)
        echo = q.enqueue("echo", {"n": 2}, priority=200)
    out = worker("--burst", dsn=dsn)
    assert out.returncode == 0 and "runner failed" not in out.stderr, out.stderr
    row = _row(dsn, job_id)
    assert row.status == "dead"
    assert "bad byte \\x00 here" in row.last_error and "\\udcff" in row.last_error
    assert _row(dsn, echo).status == "succeeded"
