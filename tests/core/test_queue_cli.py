"""The pgwork command as a user runs it: a subprocess, real database, exit codes and one-line errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.sql_files import latest_version
from tests.support.cli import pgwork
from tests.support.rows import Rows


def _jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.slow
def test_migrate_enqueue_and_ask(empty_dsn: str) -> None:
    assert f"applied migrations {list(range(1, latest_version() + 1))}" in pgwork("migrate", dsn=empty_dsn).stdout
    assert "already up to date" in pgwork("--dsn", empty_dsn, "migrate").stdout
    out = pgwork("enqueue", "ocr", "--payload", '{"doc": "a.pdf"}', "--key", "a.pdf", "--priority", "5", dsn=empty_dsn)
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout)
    pgwork("enqueue", "ocr", "--delay", "5m", dsn=empty_dsn)
    stats = json.loads(pgwork("stats", "--json", dsn=empty_dsn).stdout)
    assert stats == [
        {
            "job_type": "ocr",
            "ready": 1,
            "scheduled": 1,
            "retrying": 0,
            "running": 0,
            "dead": 0,
            "oldest_wait_seconds": stats[0]["oldest_wait_seconds"],
            "max_heartbeat_age_seconds": 0.0,
            "max_running": None,  # no limit on the type (pgwork limits)
            "rate_count": None,
            "rate_seconds": None,
            "lower_bounds": [],
            "cap": 1000,
        }
    ]
    assert "ocr" in pgwork("stats", dsn=empty_dsn).stdout
    assert pgwork("running", dsn=empty_dsn).stdout.strip() == "(none)"
    assert json.loads(pgwork("dead", "--json", dsn=empty_dsn).stdout) == []
    cancel = pgwork("cancel", str(job_id), dsn=empty_dsn)
    assert cancel.returncode == 0 and f"cancelled: [{job_id}]" in cancel.stdout
    retry = pgwork("retry", str(job_id), "--max-attempts", "9", dsn=empty_dsn)
    assert retry.returncode == 0 and f"requeued: [{job_id}]" in retry.stdout
    assert "deleted 0" in pgwork("prune", "--older-than", "7d", dsn=empty_dsn).stdout
    assert pgwork("reap", dsn=empty_dsn).returncode == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["enqueue", "ocr", "--payload", "{not json"], "--payload: not valid JSON"),
        (["enqueue", "ocr", "--payload", "[1, 2]"], "--payload: must be a JSON object"),
        (["enqueue", "ocr", "--priority", "-1"], "priority: -1 is out of range"),
        (["enqueue", "ocr", "--priority", "99999"], "priority: 99999 is out of range"),
        (["enqueue", "ocr", "--delay", "-5"], "--delay: '-5' must be a finite duration >= 0"),
        (["enqueue", "ocr", "--delay", "soon"], "--delay: 'soon' is not a duration"),
        (["enqueue", "ocr", "--max-attempts", "0"], "max_attempts: 0 is out of range"),
        (["enqueue", ""], "job_type: must be a non-empty string"),
        (["retry", "abc"], "ID: 'abc' is not a job id"),
        (["prune", "--older-than", "forever"], "--older-than: 'forever' is not a duration"),
        (["reap", "--every", "0"], "--every: must be > 0"),
    ],
)
def test_bad_arguments_are_one_clear_line_and_write_nothing(dsn: str, args: list[str], fragment: str) -> None:
    out = pgwork(*args, dsn=dsn)
    assert out.returncode == 2
    assert fragment in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert _jobs(dsn) == 0


def test_unreachable_database(dsn: str) -> None:
    out = pgwork("stats", dsn="postgresql://bob:hunter2@127.0.0.1:1/nowhere")
    assert out.returncode == 2
    assert "cannot connect to bob@127.0.0.1:1/nowhere" in out.stderr
    assert "hunter2" not in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_malformed_dsn(dsn: str) -> None:
    out = pgwork("stats", dsn="host=127.0.0.1 port=notaport password=hunter2")
    assert out.returncode == 2 and "hunter2" not in out.stderr and "Traceback" not in out.stderr
    assert "port" in out.stderr


def test_unknown_role(admin_dsn: str, dsn: str) -> None:
    from pgwork.dsn import with_dbname

    bad = with_dbname(dsn, psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])  # type: ignore[arg-type]
    bad = psycopg.conninfo.make_conninfo(bad, user="no_such_role_xyz", password="hunter2")
    out = pgwork("stats", dsn=bad)
    assert out.returncode == 2 and "no_such_role_xyz" in out.stderr and "hunter2" not in out.stderr


def test_unmigrated_database(empty_dsn: str) -> None:
    out = pgwork("stats", dsn=empty_dsn)
    assert out.returncode == 2
    assert "has no pgwork schema; run `pgwork migrate` first" in out.stderr
    assert "Traceback" not in out.stderr


# -- terminal output of job data ----------------------------------------------------------

HOSTILE = "ocr\x1b]0;owned\x07\x1b[2J\rfake\x7f\x9b\u202etxt.exe\u2066"


def _raw_controls(text: str) -> list[str]:
    import unicodedata

    return [c for c in text if c not in "\n" and unicodedata.category(c) in ("Cc", "Cf")]


@pytest.mark.slow
def test_tables_escape_control_characters_from_job_data(dsn: str) -> None:
    from pgwork.db import Queue

    with Queue(dsn, pool_size=1) as q:
        dead = q.enqueue(HOSTILE, {"n": 1}, max_attempts=1)
        retrying = q.enqueue(HOSTILE, {"n": 2}, max_attempts=3)
        running = q.enqueue(HOSTILE, {"n": 3})
        for job_id in (dead, retrying):
            (claimed,) = q.claim("w", job_types=[HOSTILE])
            assert claimed.id == job_id
            q.fail(claimed.lease, "boom\x1b[31m red\r\x07" + HOSTILE)
        q.claim("owner\x1b[5m\u202e", job_types=[HOSTILE])
    for command in ("stats", "running", "retrying", "dead"):
        out = pgwork(command, dsn=dsn)
        assert out.returncode == 0, out.stderr
        assert _raw_controls(out.stdout) == [], (command, out.stdout)
        assert "\\x1b" in out.stdout and "\\u202e" in out.stdout, (command, out.stdout)
        rows = json.loads(pgwork(command, "--json", dsn=dsn).stdout)
        assert rows and all(r["job_type"] == HOSTILE for r in rows)  # the JSON keeps the exact text
    assert str(running) in pgwork("running", dsn=dsn).stdout


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("é 漢字 ✓", "é 漢字 ✓"),
        ("a\x1b[31mb", "a\\x1b[31mb"),
        ("cr\rbel\x07del\x7f", "cr\\rbel\\x07del\\x7f"),
        ("c1\x9b", "c1\\x9b"),
        ("bidi\u202eabc\u2066\u200f", "bidi\\u202eabc\\u2066\\u200f"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("tab\tnew\nline", "tab new line"),
        ("tag\U000e0041", "tag\\U000e0041"),
    ],
)
def test_visible(text: str, shown: str) -> None:
    from pgwork.tables import visible

    assert visible(text) == shown


# -- prune --------------------------------------------------------------------------------


def _finished(dsn: str, statuses: list[str], days_ago: int) -> None:
    at = datetime.now(UTC) - timedelta(days=days_ago)
    with Queue(dsn, pool_size=1) as q:
        rows = Rows(q, job_type="ocr")
        for status in statuses:
            getattr(rows, status)(now=at)


def _statuses(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT status::text FROM pgwork.jobs").fetchall())


def test_prune_refuses_a_bare_number_and_keeps_dead_jobs_by_default(dsn: str) -> None:
    _finished(dsn, ["succeeded", "cancelled", "dead"], days_ago=2)
    before = _statuses(dsn)
    out = pgwork("prune", "--older-than", "30", dsn=dsn)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--older-than: '30' has no unit" in out.stderr and "30d" in out.stderr
    assert _statuses(dsn) == before  # nothing deleted
    out = pgwork("prune", "--older-than", "1d", dsn=dsn)
    assert out.returncode == 0 and "deleted 2 succeeded/cancelled jobs" in out.stdout, out.stdout
    assert _statuses(dsn) == ["dead"]
    refused = pgwork("prune", "--older-than", "1d", "--status", "dead", dsn=dsn)
    assert refused.returncode == 2 and "add --include-dead" in refused.stderr
    assert _statuses(dsn) == ["dead"]
    out = pgwork("prune", "--older-than", "1d", "--include-dead", dsn=dsn)
    assert out.returncode == 0 and "deleted 1 " in out.stdout
    assert _statuses(dsn) == []


@pytest.mark.slow
def test_stats_caps_counts_unless_exact_and_answers_every_type_asked_for(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
               SELECT 'ocr', '{}', 'ocr-' || g FROM generate_series(1, 1005) AS g"""
        )
    with Queue(dsn) as q:
        done = Rows(q, "mail")
        done.succeeded()  # a type whose every job succeeded: nothing live, still asked for

    capped = pgwork("stats", dsn=dsn)
    assert capped.returncode == 0, capped.stderr
    [ocr] = [line.split() for line in capped.stdout.splitlines() if line.startswith("ocr")]
    assert ocr[1] == ">=1000", capped.stdout
    exact = json.loads(pgwork("stats", "--exact", "--json", dsn=dsn).stdout)
    assert [(s["job_type"], s["ready"], s["lower_bounds"], s["cap"]) for s in exact] == [("ocr", 1005, [], None)]
    [row] = json.loads(pgwork("stats", "--json", "--job-types", "ocr", dsn=dsn).stdout)
    assert (row["ready"], row["lower_bounds"]) == (1000, ["ready"])

    # The worker's syntax (a,b), the old one (a b), and a type with zeros when asked for.
    for args in (["--job-types", "mail,ocr"], ["--job-types", "mail", "ocr"], ["--job-types", "mail, ocr,mail"]):
        rows = json.loads(pgwork("stats", "--json", "--exact", *args, dsn=dsn).stdout)
        assert [(r["job_type"], r["ready"], r["dead"]) for r in rows] == [("mail", 0, 0), ("ocr", 1005, 0)], args
    bad = pgwork("stats", "--job-types", "mail,,ocr", dsn=dsn)
    assert bad.returncode == 2 and "--job-types" in bad.stderr and "a,b,c" in bad.stderr, bad.stderr
