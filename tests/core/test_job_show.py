"""`pgwork job show ID`: one job whole, for every profile, and only what each may read."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg

from pgwork.commands.show import HIDDEN, detail_json, detail_lines
from pgwork.db import JobDetail, Queue
from pgwork.progress import Progress
from tests.support.cli import pgwork
from tests.support.db import MakeRole

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _running_job(dsn: str) -> int:
    """A job on its second attempt: the first failed, the second runs with progress and a checkpoint."""
    with Queue(dsn) as q:
        job_id = q.enqueue("ocr", {"doc": "secret.pdf"}, trace_context={"traceparent": TRACEPARENT}, timeout="10m")
        [first] = q.claim("pod-a", job_types=["ocr"])
        q.fail(first.lease, "page 3 unreadable", delay=0)
        [second] = q.claim("pod-b", job_types=["ocr"])
        assert second.id == job_id
        q.heartbeat_many([second.lease], progress={job_id: Progress(0.4, "page 4/10")})
        assert q.checkpoint(second.lease, {"page": 4})
    return job_id


def test_job_show_tells_the_whole_job_to_its_owner(dsn: str) -> None:
    job_id = _running_job(dsn)
    out = pgwork("job", "show", str(job_id), dsn=dsn)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in (
        f"{job_id}  ocr  running",
        "attempts    2 of 5",
        "held by pod-b, expires in",
        "; heartbeat",
        "40% 'page 4/10'",
        "timeout     10m",
        "trace id    0af7651916cd43dd8448eb211c80319c",
        "page 3 unreadable",
        '{"doc": "secret.pdf"}',
        '{"page": 4}',
    ):
        assert expected in text, (expected, text)
    shown = json.loads(pgwork("job", "show", str(job_id), "--json", dsn=dsn).stdout)
    assert shown["status"] == "running" and shown["lease_owner"] == "pod-b"
    assert shown["payload"] == {"doc": "secret.pdf"} and shown["checkpoint"] == {"page": 4}
    assert shown["contents_visible"] is True and shown["progress"] == 0.4
    assert shown["lease_remaining_seconds"] > 0 and shown["since_checkpoint_seconds"] >= 0
    assert shown["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def test_job_show_a_succeeded_job_shows_its_result(dsn: str) -> None:
    with Queue(dsn) as q:
        job_id = q.enqueue("ocr", {"doc": 1})
        [job] = q.claim("pod-a")
        q.succeed(job.lease, {"pages": 12})
    shown = json.loads(pgwork("job", "show", str(job_id), "--json", dsn=dsn).stdout)
    assert (shown["status"], shown["has_result"], shown["result"]) == ("succeeded", True, {"pages": 12})
    assert shown["lease_remaining_seconds"] is None and shown["completed_at"]
    assert '{"pages": 12}' in pgwork("job", "show", str(job_id), dsn=dsn).stdout


def test_reader_sees_the_life_but_no_payload_and_producer_sees_both(dsn: str, make_role: MakeRole) -> None:
    job_id = _running_job(dsn)
    reader = make_role("reader")
    out = pgwork("job", "show", str(job_id), dsn=reader)
    assert out.returncode == 0, out.stderr
    assert "held by pod-b" in out.stdout and HIDDEN in out.stdout
    assert "secret.pdf" not in out.stdout and "page" not in out.stdout.split("last error")[1].split("\n", 1)[1]
    shown = json.loads(pgwork("job", "show", str(job_id), "--json", dsn=reader).stdout)
    assert shown["contents_visible"] is False and shown["payload"] is None and shown["checkpoint"] is None
    # The reader still may not read contents by calling the function itself.
    with psycopg.connect(reader) as conn:
        try:
            conn.execute("SELECT * FROM pgwork.job_contents(%s)", (job_id,))
        except psycopg.errors.InsufficientPrivilege:
            pass
        else:
            raise AssertionError("the reader read a payload")
    producer = make_role("producer")
    assert "secret.pdf" in pgwork("job", "show", str(job_id), dsn=producer).stdout


def test_job_show_of_no_such_job_says_so(dsn: str) -> None:
    out = pgwork("job", "show", "999999", dsn=dsn)
    assert out.returncode == 2 and "no job 999999" in out.stderr and out.stdout == ""
    out = pgwork("job", "show", "abc", dsn=dsn)
    assert out.returncode == 2 and "ID" in out.stderr


def test_detail_lines_and_json_are_pure() -> None:
    now = datetime(2030, 1, 1, 12, 0, 10, tzinfo=UTC)
    at = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    d = JobDetail(
        id=7, job_type="mail\x1b[2J", status="pending", priority=100, attempt_count=1, max_attempts=3,
        created_at=at, available_at=now, started_at=at, completed_at=None, lease_owner="pod-a",
        lease_expires_at=None, heartbeat_at=None, cancel_requested_at=None,
        last_error="boom\n[lease expired, reclaimed from pod-a]", idempotency_key="k", is_unique=True,
        timeout_seconds=None, progress=None, progress_note=None, progress_at=None, checkpoint_at=None,
        has_result=False, trace_id=None, now=now, may_read_contents=False,
    )  # fmt: skip
    lines = dict(detail_lines(d, None))
    assert lines["job"] == "7  mail\\x1b[2J  pending"  # a terminal escape in a type is shown, not obeyed
    assert lines["created"].endswith("(10s ago)") and lines["lease"] == "none (last held by pod-a)"
    assert lines["key"] == "k (unique)" and lines["payload"] == HIDDEN
    assert lines["last error"] == "boom [lease expired, reclaimed from pod-a]"
    shown = detail_json(d, None)
    assert shown["contents_visible"] is False and shown["since_heartbeat_seconds"] is None
    assert "may_read_contents" not in shown and "now" not in shown


def test_trace_context_round_trip_names_the_trace_id(dsn: str) -> None:
    # The id shown is the traceparent's second field; the tracestate (vendor data) is not shown.
    with Queue(dsn) as q:
        job_id = q.enqueue("ocr", {}, trace_context={"traceparent": TRACEPARENT, "tracestate": "vendor=secret"})
        detail = q.job_detail(job_id)
    assert detail is not None and detail.trace_id == "0af7651916cd43dd8448eb211c80319c"
