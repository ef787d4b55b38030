"""Progress rides on the heartbeat and a checkpoint is saved at once, both fenced by the lease
token; the next attempt's claim returns the checkpoint (migration 0012), on the real PostgreSQL."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue, new_token
from pgwork.errors import InvalidArgument
from pgwork.models import Lease, LeaseState
from pgwork.progress import MAX_CHECKPOINT_BYTES, MAX_NOTE_CHARS, Progress, check_progress, checkpoint_json
from tests.support.db import MakeRole
from tests.support.rows import Rows

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _progress(queue: Queue, job_id: int) -> tuple[float | None, str | None, datetime | None]:
    row = queue.job(job_id)
    assert row is not None
    return row.progress, row.progress_note, row.progress_at


# -- the pure checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "note", "expected"),
    [
        (0, None, Progress(0.0)),
        (1, "done", Progress(1.0, "done")),
        (0.4, "page 3 of 10", Progress(0.4, "page 3 of 10")),
        (0.5, "", Progress(0.5)),
        (0.5, "x" * 500, Progress(0.5, "x" * 185 + " …[truncated]")),
        (0.5, "nul\x00here", Progress(0.5, "nul\\x00here")),
        (0.5, "bad \udcff byte", Progress(0.5, "bad \\udcff byte")),
    ],
)
def test_check_progress_keeps_what_can_be_stored(fraction: float, note: str | None, expected: Progress) -> None:
    reported = check_progress(fraction, note)
    assert reported == expected
    assert reported.note is None or len(reported.note) <= MAX_NOTE_CHARS


@pytest.mark.parametrize(
    ("fraction", "note", "field", "words"),
    [
        (40, None, "fraction", "outside 0..1"),
        (-0.1, None, "fraction", "outside 0..1"),
        (math.nan, None, "fraction", "outside 0..1"),
        (math.inf, None, "fraction", "outside 0..1"),
        (True, None, "fraction", "must be a number"),
        ("0.4", None, "fraction", "must be a number"),
        (None, None, "fraction", "must be a number"),
        (0.4, 3, "note", "must be a string"),
    ],
)
def test_check_progress_refuses_with_the_field_and_the_fix(fraction: Any, note: Any, field: str, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words) as caught:
        check_progress(fraction, note)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ({"page": math.nan}, "NaN"),
        ({"blob": "x" * MAX_CHECKPOINT_BYTES}, f"over the limit of {MAX_CHECKPOINT_BYTES}"),
        ({"when": object()}, "not JSON-serialisable"),
        ({"k": "nul\x00"}, "NUL"),
    ],
)
def test_checkpoint_json_refuses_what_cannot_be_saved(state: Any, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words) as caught:
        checkpoint_json(state)
    assert caught.value.field == "state"


# -- progress on the heartbeat ----------------------------------------------------------------


def test_progress_is_stored_with_the_renewal_of_the_jobs_that_report_it(queue: Queue) -> None:
    rows = Rows(queue, "pages")
    a, b = rows.running(now=T0), rows.running(now=T0)
    states = queue.heartbeat_many(
        [a.lease, b.lease], lease_seconds=60, now=T0 + timedelta(seconds=5), progress={a.id: Progress(0.4, "page 4")}
    )
    assert states == {a.id: LeaseState.HELD, b.id: LeaseState.HELD}
    assert _progress(queue, a.id) == (0.4, "page 4", T0 + timedelta(seconds=5))
    assert _progress(queue, b.id) == (None, None, None)
    # A renewal without progress keeps it; the same value again keeps when it last changed.
    queue.heartbeat_many([a.lease], lease_seconds=60, now=T0 + timedelta(seconds=10))
    queue.heartbeat_many(
        [a.lease], lease_seconds=60, now=T0 + timedelta(seconds=15), progress={a.id: Progress(0.4, "page 4")}
    )
    assert _progress(queue, a.id) == (0.4, "page 4", T0 + timedelta(seconds=5))
    queue.heartbeat_many([a.lease], lease_seconds=60, now=T0 + timedelta(seconds=20), progress={a.id: Progress(0.5)})
    assert _progress(queue, a.id) == (0.5, None, T0 + timedelta(seconds=20))
    row = queue.job(a.id)
    assert row is not None and row.lease_expires_at == T0 + timedelta(seconds=80)


def test_progress_with_a_stale_token_writes_nothing(queue: Queue) -> None:
    held = Rows(queue, "pages").running(now=T0)
    forged = Lease(held.id, new_token(), "intruder", 1, 5)
    states = queue.heartbeat_many([forged], lease_seconds=60, now=T0, progress={held.id: Progress(0.9, "mine")})
    assert states == {held.id: LeaseState.LOST}
    assert _progress(queue, held.id) == (None, None, None)


@pytest.mark.parametrize("fraction", ["'NaN'", "2", "-1", "'Infinity'"])
def test_a_bad_fraction_sent_by_hand_is_dropped_and_the_lease_still_renewed(queue: Queue, fraction: str) -> None:
    held = Rows(queue, "pages").running(lease=5)
    with psycopg.connect(queue.dsn) as conn:
        renewed = conn.execute(
            "SELECT * FROM pgwork.heartbeat(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[], 600,"
            f" ARRAY[{fraction}]::float8[], ARRAY[repeat('n', 1000)])",
            (held.id, held.lease.token),
        ).fetchall()
    assert [r[0] for r in renewed] == [held.id]
    assert _progress(queue, held.id) == (None, None, None)
    row = queue.job(held.id)
    assert row is not None and row.lease_expires_at is not None
    assert row.lease_expires_at > datetime.now(UTC) + timedelta(seconds=300)


def test_a_long_note_sent_by_hand_is_cut_not_refused(queue: Queue) -> None:
    held = Rows(queue, "pages").running()
    with psycopg.connect(queue.dsn) as conn:
        conn.execute(
            "SELECT * FROM pgwork.heartbeat(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[], 60,"
            " ARRAY[0.5], ARRAY[repeat('n', 1000)])",
            (held.id, held.lease.token),
        )
    fraction, note, _ = _progress(queue, held.id)
    assert fraction == 0.5 and note == "n" * MAX_NOTE_CHARS


def test_the_table_refuses_a_fraction_outside_0_to_1_from_any_writer(queue: Queue) -> None:
    held = Rows(queue, "pages").running()
    with psycopg.connect(queue.dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE pgwork.jobs SET progress = 1.5 WHERE id = %s", (held.id,))


# -- checkpoints --------------------------------------------------------------------------------


def test_a_checkpoint_is_fenced_and_the_next_attempt_receives_it(queue: Queue) -> None:
    rows = Rows(queue, "pages")
    first = rows.running(now=T0)
    assert first.checkpoint is None
    assert queue.checkpoint(first.lease, {"page": 3, "done": ["p1", "p2"]}, now=T0) is True
    assert queue.checkpoint(Lease(first.id, new_token(), "intruder", 1, 5), {"page": 99}) is False
    queue.heartbeat_many([first.lease], lease_seconds=30, now=T0, progress={first.id: Progress(0.3, "page 3")})
    queue.fail(first.lease, "backend 503", delay=0, now=T0)
    [second] = queue.claim("w2", job_types=["pages"], now=T0 + timedelta(seconds=1))
    assert (second.id, second.attempt, second.checkpoint) == (first.id, 2, {"page": 3, "done": ["p1", "p2"]})
    # The progress was the first attempt's; the second starts without one.
    assert _progress(queue, first.id) == (None, None, None)
    # The first attempt's lease is gone: its checkpoint can no longer land.
    assert queue.checkpoint(first.lease, {"page": 1}) is False
    row = queue.job(first.id)
    assert row is not None and row.checkpoint == {"page": 3, "done": ["p1", "p2"]}


def test_a_reaped_job_hands_its_last_checkpoint_to_the_next_claim(queue: Queue) -> None:
    held = Rows(queue, "pages").running(now=T0, lease=10)
    queue.checkpoint(held.lease, {"page": 1}, now=T0)
    queue.checkpoint(held.lease, {"page": 7}, now=T0 + timedelta(seconds=5))
    reaped = queue.reap(now=T0 + timedelta(seconds=60))
    assert [(r.id, r.status) for r in reaped] == [(held.id, "pending")]
    [again] = queue.claim("w2", job_types=["pages"], now=T0 + timedelta(seconds=61))
    assert again.checkpoint == {"page": 7}


def test_none_clears_the_checkpoint(queue: Queue) -> None:
    held = Rows(queue, "pages").running()
    queue.checkpoint(held.lease, [1, 2, 3])
    assert queue.checkpoint(held.lease, None) is True
    row = queue.job(held.id)
    assert row is not None and row.checkpoint is None


def test_a_succeeded_job_keeps_its_last_progress_and_checkpoint(queue: Queue) -> None:
    held = Rows(queue, "pages").running(now=T0)
    queue.checkpoint(held.lease, {"page": 10}, now=T0)
    queue.heartbeat_many([held.lease], lease_seconds=30, now=T0, progress={held.id: Progress(1.0, "10 of 10")})
    queue.succeed(held.lease, {"pages": 10}, now=T0)
    row = queue.job(held.id)
    assert row is not None and row.status == "succeeded"
    assert (row.progress, row.progress_note, row.checkpoint) == (1.0, "10 of 10", {"page": 10})


def test_the_server_refuses_a_checkpoint_past_its_cap_with_the_figure(queue: Queue) -> None:
    held = Rows(queue, "pages").running()
    big = json.dumps({"blob": "x" * MAX_CHECKPOINT_BYTES})
    with (
        psycopg.connect(queue.dsn) as conn,
        pytest.raises(psycopg.errors.ProgramLimitExceeded, match="at most 65536 bytes"),
    ):
        conn.execute("SELECT * FROM pgwork.checkpoint(%s, %s, %s::jsonb)", (held.id, held.lease.token, big))
    with pytest.raises(InvalidArgument, match="over the limit of 65536"):
        queue.checkpoint(held.lease, {"blob": "x" * MAX_CHECKPOINT_BYTES})
    row = queue.job(held.id)
    assert row is not None and row.checkpoint is None


# -- shown, and granted ----------------------------------------------------------------------


def test_running_shows_progress_and_the_checkpoint_age_not_its_content(queue: Queue, make_role: MakeRole) -> None:
    rows = Rows(queue, "pages")
    a, b = rows.running(now=T0), rows.running(now=T0)
    queue.heartbeat_many([a.lease], lease_seconds=600, now=T0, progress={a.id: Progress(0.25, "page 1 of 4")})
    queue.checkpoint(a.lease, {"secret": "payload-ish"}, now=T0 + timedelta(seconds=30))
    shown = {r.id: r for r in queue.running(now=T0 + timedelta(seconds=60))}
    assert (shown[a.id].progress, shown[a.id].progress_note) == (0.25, "page 1 of 4")
    assert (shown[a.id].since_progress_seconds, shown[a.id].since_checkpoint_seconds) == (60.0, 30.0)
    assert (shown[b.id].progress, shown[b.id].since_progress_seconds, shown[b.id].since_checkpoint_seconds) == (
        None,
        None,
        None,
    )
    # The reader profile still reads the view and the function after they were made again.
    with psycopg.connect(make_role("reader")) as conn:
        view = conn.execute("SELECT id, progress, progress_note FROM pgwork.running ORDER BY id").fetchall()
        columns = [c.name for c in conn.execute("SELECT * FROM pgwork.running_jobs()").description or []]
    assert view == [(a.id, 0.25, "page 1 of 4"), (b.id, None, None)]
    assert "checkpoint" not in columns and "since_checkpoint_seconds" in columns


def test_the_worker_profile_reports_progress_and_checkpoints(queue: Queue, make_role: MakeRole) -> None:
    queue.enqueue("pages", {"n": 1})
    with Queue(make_role("worker")) as q:
        [held] = q.claim("w1", job_types=["pages"])
        assert q.heartbeat_many([held.lease], progress={held.id: Progress(0.5, "half")}) == {held.id: LeaseState.HELD}
        assert q.checkpoint(held.lease, {"page": 5}) is True
    assert _progress(queue, held.id)[:2] == (0.5, "half")
    with psycopg.connect(make_role("reader")) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM pgwork.checkpoint(%s, %s, '{}')", (held.id, held.lease.token))
