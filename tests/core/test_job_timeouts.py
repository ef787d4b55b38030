"""A job's hard timeout in the database (migration 0010): stored by every enqueue path, bounded
by a CHECK for rows written by plain SQL, handed to the worker by the claim; and a cancel that
loses the race with a success is kept on the succeeded row."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from pgwork import App
from pgwork.cli import main
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, NewJob
from pgwork.validation import check_timeout
from tests.support.db import MakeRole
from tests.support.producers import Producer
from tests.support.rows import Rows

CONSTRAINT = "jobs_timeout_seconds_over_0_at_most_604800"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_enqueue_stores_the_timeout_and_the_claim_returns_it(dsn: str, queue: Queue, flavour: str) -> None:
    producer = Producer(flavour, dsn)
    try:
        own = producer.call("enqueue", "ocr", {"n": 1}, timeout="10m")
        none = producer.call("enqueue", "ocr", {"n": 2})
        many = producer.call("enqueue_many", [NewJob("ocr", {"n": 3}, timeout=timedelta(seconds=90))])
    finally:
        producer.close()
    assert queue.job(own).timeout_seconds == 600.0
    assert queue.job(none).timeout_seconds is None
    claimed = {c.id: c.timeout for c in queue.claim("w", job_types=["ocr"], limit=3)}
    assert claimed == {own: 600.0, none: None, many[0]: 90.0}


def test_bulk_paths_store_the_timeout(queue: Queue) -> None:
    # Past BULK_THRESHOLD enqueue_many goes through COPY into a staging table; load_jobs straight in.
    jobs = [NewJob("bulk", {"n": i}, timeout=30 if i % 2 else None) for i in range(1200)]
    ids = queue.enqueue_many(jobs)
    assert [queue.job(i).timeout_seconds for i in ids[:4]] == [None, 30.0, None, 30.0]
    assert queue.load_jobs([NewJob("loaded", {"n": 1}, timeout="1h30m")]) == 1
    [claimed] = queue.claim("w", job_types=["loaded"])
    assert claimed.timeout == 5400.0


def test_a_producer_role_may_set_the_timeout(make_role: MakeRole, queue: Queue) -> None:
    with Queue(make_role("producer")) as q:
        job_id = q.enqueue("ocr", {}, timeout=5)
    assert queue.job(job_id).timeout_seconds == 5.0


def test_app_enqueue_passes_the_timeout(dsn: str) -> None:
    with App(dsn) as app:
        job_id = app.enqueue("ocr", {}, timeout="45s")
        assert app.job(job_id).timeout_seconds == 45.0


BAD = [
    (0, "is not a duration above zero"),
    (-5, "is not a duration above zero"),
    ("-5s", "is not a duration above zero"),
    (float("nan"), "is not a duration above zero"),
    (float("inf"), "is not a duration above zero"),
    ("8d", "is more than 7 days"),
    (604801, "is more than 7 days"),
    ("ten minutes", "is not a duration"),
    ("1e3", "is not a duration"),
    (True, "must be seconds or a duration"),
    ([60], "must be seconds or a duration"),
]


@pytest.mark.parametrize(("value", "problem"), BAD)
def test_bad_timeouts_are_refused_at_enqueue_naming_the_field(queue: Queue, value: object, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem) as caught:
        queue.enqueue("ocr", {}, timeout=value)  # type: ignore[arg-type]
    assert caught.value.field == "timeout"
    assert "like 30s, 10m or 2h" in caught.value.fix
    with pytest.raises(InvalidArgument, match=r"timeout: .*\(job 1 of the batch"):
        queue.enqueue_many([NewJob("ocr", {"n": 0}), NewJob("ocr", {"n": 1}, timeout=value)])  # type: ignore[arg-type]
    assert queue.stats() == []  # nothing was written


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, None), (1, 1.0), (0.25, 0.25), ("10m", 600.0), ("1h30m", 5400.0), (timedelta(days=7), 604800.0)],
)
def test_good_timeouts(value: object, seconds: float | None) -> None:
    assert check_timeout(value) == seconds


@pytest.mark.parametrize("value", ["0", "-1", "'NaN'", "'Infinity'", "604800.5"])
def test_the_database_refuses_a_bad_timeout_from_plain_sql(queue: Queue, value: str) -> None:
    with (
        psycopg.connect(queue.dsn) as conn,
        pytest.raises(psycopg.errors.CheckViolation, match=CONSTRAINT),
    ):
        conn.execute(
            f"INSERT INTO pgwork.jobs (job_type, idempotency_key, timeout_seconds) VALUES ('ocr', 'k', {value})"
        )


def test_plain_sql_may_write_a_good_timeout(queue: Queue) -> None:
    with psycopg.connect(queue.dsn) as conn:
        conn.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key, timeout_seconds) VALUES ('ocr', 'k', 604800)")
    [claimed] = queue.claim("w")
    assert claimed.timeout == 604800.0


def test_cli_enqueue_timeout(dsn: str, queue: Queue, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dsn", dsn, "enqueue", "ocr", "--timeout", "10m"]) == 0
    job_id = int(capsys.readouterr().out.strip())
    assert queue.job(job_id).timeout_seconds == 600.0
    assert main(["--dsn", dsn, "enqueue", "ocr", "--payload", '{"n": 2}', "--timeout", "0"]) == 2
    err = capsys.readouterr().err
    assert "--timeout: '0' is not a duration above zero" in err and "like 30s, 10m or 2h" in err


def test_a_jobs_file_line_may_carry_a_timeout(dsn: str, queue: Queue, tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps({"job_type": "ocr", "payload": {"n": 1}, "timeout": "2m"}) + "\n")
    assert main(["--dsn", dsn, "enqueue", "--from-file", str(path)]) == 0
    [claimed] = queue.claim("w")
    assert claimed.timeout == 120.0


def test_a_cancel_that_loses_the_race_with_a_success_stays_on_the_row(queue: Queue) -> None:
    held = Rows(queue).cancel_requested(key="raced")
    # The handler returned before a heartbeat told it of the cancel: the success lands.
    assert queue.succeed(held.lease, {"pages": 3}) is Completion.CREATED
    row = queue.job(held.id)
    assert row.status == "succeeded"
    assert row.cancel_requested_at is not None  # the request is kept, not reset
    assert "[cancel requested at " in row.last_error and "came too late" in row.last_error
    assert queue.result("raced").result == {"pages": 3}
    # The batched path says the same.
    other = Rows(queue).cancel_requested(key="raced-many")
    assert queue.succeed_many([(other.lease, 1)]) == {other.id: Completion.CREATED}
    assert "came too late" in queue.job(other.id).last_error
    # A success without a cancel request leaves last_error alone.
    plain = Rows(queue).running(key="plain")
    queue.succeed(plain.lease, 1)
    assert queue.job(plain.id).last_error is None and queue.job(plain.id).cancel_requested_at is None
