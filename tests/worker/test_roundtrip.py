"""A one-job worker finishes a job and claims the next in one round trip (psycopg pipeline mode):
one short transaction with the claim behind a savepoint, the finish fenced by its token as ever;
a failed claim never undoes the finish, and an error in either never loses the job nor skips the
claim's own error handling."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta

import pgwork_test_app  # noqa: F401 - registers the handlers
import psycopg
import pytest

from pgwork.db import Queue
from pgwork.db.batches import DecidedFailure, StoredSuccess
from pgwork.db.roundtrip import claim_params, finish_then_claim, success_params
from pgwork.failure import decide_failure
from pgwork.models import ClaimedJob, Completion
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.claims import ClaimGate, ClaimRoom
from pgwork.worker.finishes import Finisher
from pgwork.worker.job import Job
from pgwork.worker.outcome import Decision, Outcome
from tests.support.rows import Rows
from tests.support.waiting import wait_for
from tests.support.workers import Spawn, run_burst


def _decided(claimed: ClaimedJob, decision: Decision) -> Attempt:
    job = Job(claimed.id, claimed.job_type, {}, claimed.attempt, claimed.max_attempts, claimed.idempotency_key)
    attempt = Attempt(claimed, job, 30, decision=decision)
    attempt.state = AttemptState.FINISHING
    return attempt


def test_finish_and_claim_commit_together_in_one_round_trip(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    first = rows.running()
    second = rows.pending()
    finished = queue.finish_then_claim([StoredSuccess(first.lease, '{"n": 1}')], [], "w-rt", job_types=["rt"])
    assert finished.completions == {first.id: Completion.CREATED}
    assert [c.id for c in finished.claimed or []] == [second]
    done, next_job = queue.job(first.id), queue.job(second)
    assert done is not None and done.status == "succeeded" and done.lease_token is None
    assert next_job is not None and next_job.status == "running" and next_job.attempt_count == 1
    assert next_job.lease_owner == "w-rt" and next_job.lease_token == finished.claimed[0].lease.token  # type: ignore[index]
    result = queue.result(first.idempotency_key)
    assert result is not None and result.result == {"n": 1}
    # One transaction (one commit): the claim's now() is the finish's, so the next job starts at
    # the instant the last one completed.
    assert done.completed_at is not None and next_job.started_at == done.completed_at


def test_a_fenced_out_finish_writes_nothing_and_the_claim_still_runs(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    lost_job = rows.running(lease=5)
    # The reaper took it back (its lease lapsed) and another worker holds it now.
    later = datetime.now(UTC) + timedelta(seconds=60)
    assert [r.id for r in queue.reap(now=later)] == [lost_job.id]
    thief = queue.claim("thief", job_types=["rt"], now=later)
    assert [c.id for c in thief] == [lost_job.id]
    ready = rows.pending()
    finished = queue.finish_then_claim([StoredSuccess(lost_job.lease, '"stale"')], [], "w-rt", job_types=["rt"])
    assert finished.completions == {lost_job.id: Completion.LEASE_LOST}
    assert [c.id for c in finished.claimed or []] == [ready]
    row = queue.job(lost_job.id)
    assert row is not None and row.status == "running" and row.lease_owner == "thief"
    assert queue.result(lost_job.idempotency_key) is None


def test_a_finish_the_server_refuses_claims_nothing_and_leaves_the_connection_clean(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    held = rows.running()
    ready = rows.pending()
    with pytest.raises(psycopg.DataError):
        # Not JSON: the server refuses the finish, so the claim behind it in the pipeline never runs.
        queue.finish_then_claim([StoredSuccess(held.lease, "{not json")], [], "w-rt", job_types=["rt"])
    row, waiting = queue.job(held.id), queue.job(ready)
    assert row is not None and row.status == "running" and row.lease_token == held.lease.token
    assert waiting is not None and waiting.status == "pending" and waiting.attempt_count == 0
    # The pool's connections are usable afterwards (the aborted transaction was rolled back).
    for _ in range(3):
        assert queue.job(held.id) is not None


def test_a_claim_that_fails_after_the_finish_keeps_the_finish(queue: Queue, dsn: str) -> None:
    rows = Rows(queue, "rt")
    held = rows.running()
    ready = rows.pending()
    succeed = success_params([held.id], [held.lease.token], ['{"ok": true}'], None)
    claim = claim_params("w-rt", ["rt"], 1, 30.0, None)
    claim["limit"] = -1  # past the client's checks: the claim function itself refuses it
    with psycopg.connect(dsn, autocommit=True) as conn:
        trip = finish_then_claim(conn, succeed, None, claim)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert trip.claimed is None and trip.claim_error is not None
    assert [r.id for r in trip.done] == [held.id]
    row, waiting = queue.job(held.id), queue.job(ready)
    assert row is not None and row.status == "succeeded"
    assert queue.result(held.idempotency_key) is not None
    assert waiting is not None and waiting.status == "pending" and waiting.attempt_count == 0


def _finisher(queue: Queue, taken: list[list[ClaimedJob]], room: int = 1) -> Finisher:
    gate = ClaimGate(ClaimRoom("w-rt", ["rt"], 30.0, lambda: room, lambda jobs, _s: taken.append(jobs)))
    return Finisher(queue, lambda _answers, _wake: None, lambda: False, lambda: None, gate=gate)


@pytest.mark.parametrize(
    ("room", "ready", "wakes"),
    [
        (1, 1, False),  # a one-job worker: the claim filled its slot, nothing for the main loop to do
        (2, 1, True),  # room left over: the main loop may find more (or a burst worker its end)
        (1, 0, True),  # nothing came back: the main loop polls (a burst worker exits)
    ],
)
def test_the_main_loop_is_woken_after_a_write_unless_its_claim_filled_the_room(
    queue: Queue, room: int, ready: int, wakes: bool
) -> None:
    held = Rows(queue, "held")  # the job being finished; "rt" jobs wait to be claimed
    for _ in range(ready):
        Rows(queue, "rt").pending()
    taken: list[list[ClaimedJob]] = []
    told: list[bool] = []
    gate = ClaimGate(ClaimRoom("w-rt", ["rt"], 30.0, lambda: room, lambda jobs, _s: taken.append(jobs)))
    finisher = Finisher(
        queue, lambda _answers, wake: told.append(wake), lambda: False, lambda: None, gate=gate, inline=True
    )
    assert finisher.submit(_decided(held.running(), Decision(Outcome.SUCCEEDED)))  # written inline
    assert told == [wakes]
    assert [len(jobs) for jobs in taken] == [ready]


def test_the_finisher_claims_with_its_write_and_a_lost_lease_is_reported_lost(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    gone = rows.running(lease=5)
    later = datetime.now(UTC) + timedelta(seconds=60)
    queue.reap(now=later)
    assert [c.id for c in queue.claim("thief", job_types=["rt"], now=later)] == [gone.id]
    ready = rows.pending()
    taken: list[list[ClaimedJob]] = []
    finisher = _finisher(queue, taken)
    decided = Decision(Outcome.SUCCEEDED, result_json='"late"')
    answers = finisher.write([_decided(gone, decided)])
    assert [(a.decision, o) for a, o in answers] == [(decided, Outcome.LEASE_LOST)]  # answered, not rewritten
    assert [[c.id for c in jobs] for jobs in taken] == [[ready]]
    assert finisher.pipelined_claims == 1


def test_the_finisher_claims_nothing_without_room_or_while_another_claim_runs(queue: Queue) -> None:
    held = Rows(queue, "held")  # the jobs being finished; "rt" jobs wait to be claimed
    ready = Rows(queue, "rt").pending()
    taken: list[list[ClaimedJob]] = []
    full = _finisher(queue, taken, room=0)
    answers = full.write([_decided(held.running(), Decision(Outcome.SUCCEEDED))])
    assert [o for _, o in answers] == [Outcome.SUCCEEDED]
    busy = _finisher(queue, taken)
    assert busy._gate is not None and busy._gate.enter()  # the main loop is claiming
    answers = busy.write([_decided(held.running(), Decision(Outcome.SUCCEEDED))])
    assert [o for _, o in answers] == [Outcome.SUCCEEDED]
    assert taken == [] and full.pipelined_claims == busy.pipelined_claims == 0
    row = queue.job(ready)
    assert row is not None and row.status == "pending"


def test_a_refused_result_is_still_split_out_and_failed_after_a_pipelined_try(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    bad = rows.running(max_attempts=1)
    rows.pending()
    taken: list[list[ClaimedJob]] = []
    finisher = _finisher(queue, taken)
    answers = finisher.write([_decided(bad, Decision(Outcome.SUCCEEDED, result_json="{not json"))])
    assert [o for _, o in answers] == [Outcome.DEAD]
    row = queue.job(bad.id)
    assert row is not None and row.status == "dead" and row.last_error
    assert taken == []  # nothing was claimed by the write that failed; the main loop claims


def test_a_one_job_worker_claims_each_next_job_with_the_last_finish(queue: Queue) -> None:
    ids = [queue.enqueue("noop", {"n": i}) for i in range(30)]
    worker = run_burst(queue, concurrency=1, batch=1)
    for job_id in ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "succeeded" and row.attempt_count == 1
    assert worker.claims == 30
    # All but the first claim rode on a finish (the main loop claims first, and once more to
    # find the queue empty).
    assert worker.finisher.pipelined_claims >= 29
    count = next(s.value for s in worker.metrics.claim_duration.collect()[0].samples if s.name.endswith("_count"))
    assert count >= 30


def _succeeded(queue: Queue, ids: list[int]) -> int:
    return sum(1 for i in ids if (row := queue.job(i)) is not None and row.status == "succeeded")


def test_a_pipelining_worker_still_drains_on_sigterm(queue: Queue, spawn_worker: Spawn) -> None:
    ids = [queue.enqueue("sleep", {"seconds": 0.05, "n": i}) for i in range(400)]
    w = spawn_worker("--concurrency", "1", "--batch", "1", "--grace", "5s")
    wait_for(lambda: _succeeded(queue, ids) >= 5, 30, what="a few jobs done")
    w.signal(signal.SIGTERM)
    assert w.wait(15) == 0
    rows = [queue.job(i) for i in ids]
    assert all(r is not None and r.status in ("succeeded", "pending") for r in rows)
    left = [r for r in rows if r is not None and r.status == "pending"]
    assert left  # it stopped claiming: the rest wait for another worker
    # Every job claimed once at most; one claimed with the last finish was released, not kept.
    assert all(r is not None and r.attempt_count == (1 if r.status == "succeeded" else r.attempt_count) for r in rows)
    assert all(r.attempt_count <= 1 and r.lease_token is None for r in left)
    assert queue.running() == []
    assert queue.reap() == []


# Text the one message carries bound into its SQL (ClientCursor.mogrify): quotes, backslashes, a
# statement terminator and a comment, dollar quoting, Unicode and control characters must land
# byte for byte, never end a literal early.
HOSTILE = "it's \\' \\\\ '); DROP TABLE pgwork.jobs; -- $$ $q$ /* é ☃ \U0001f600 \t\r\n \x1b[31m"


def test_hostile_text_in_a_result_and_an_error_is_stored_as_given(queue: Queue) -> None:
    rows = Rows(queue, "rt")
    ok, failing = rows.running(), rows.running()
    ready = rows.pending()
    result = json.dumps({"text": HOSTILE, HOSTILE: [HOSTILE]})
    decision = decide_failure(failing.lease.attempt, 5, True, 30.0, datetime.now(UTC))
    finished = queue.finish_then_claim(
        [StoredSuccess(ok.lease, result)], [DecidedFailure(failing.lease, decision, HOSTILE)], "w-rt", job_types=["rt"]
    )
    assert finished.completions == {ok.id: Completion.CREATED}
    assert [c.id for c in finished.claimed or []] == [ready]
    stored = queue.result(ok.idempotency_key)
    assert stored is not None and stored.result == {"text": HOSTILE, HOSTILE: [HOSTILE]}
    failed = queue.job(failing.id)
    assert failed is not None and failed.status == "pending" and failed.last_error is not None
    assert HOSTILE.splitlines()[0] in failed.last_error
    assert queue.job(ok.id) is not None  # the table is still there, and the row in it
