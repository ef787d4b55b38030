"""Per-type limits hold fleet-wide: 16 concurrent claimers never run more than max_running of a
type at once nor claim more than its rate allows, and every way a job stops running gives its
slot back (nothing to drift: the claim counts running jobs under the type's lock)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue, claim_statement
from pgwork.db.batches import DecidedFailure
from pgwork.failure import decide_failure
from pgwork.limits import Rate
from pgwork.models import ClaimedJob, NewJob
from tests.support.db import MakeRole

CLAIMERS = 16
Denied = psycopg.errors.InsufficientPrivilege


def _running(dsn: str, job_type: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgwork.jobs WHERE status = 'running' AND job_type = %s", (job_type,)
        ).fetchone()
    assert row is not None
    return int(row[0])


class Peak:
    """Jobs of one type held by the claimers, counted on the client: a job is counted after its
    claim commits and uncounted before its finish is sent, so what is counted here is always a
    subset of what the database has running, and a peak above the limit is a limit exceeded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = 0
        self.peak = 0
        self.claimed = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.held += n
            self.claimed += n
            self.peak = max(self.peak, self.held)

    def remove(self, n: int) -> None:
        with self._lock:
            self.held -= n


def _run_claimers(work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(CLAIMERS)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLAIMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


@pytest.mark.parametrize("round_", range(3))
def test_sixteen_claimers_never_run_more_than_max_running(dsn: str, round_: int) -> None:
    limit = 4
    with Queue(dsn) as owner:
        owner.enqueue_many([NewJob("gpu", {"n": i}) for i in range(400)])
        owner.enqueue_many([NewJob("cpu", {"n": i}) for i in range(400)])
        assert owner.set_limit("gpu", max_running=limit) is True
    gpu = Peak()
    others = Peak()
    seen_in_db: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen_in_db.append(_running(dsn, "gpu"))

    def work(i: int) -> None:
        rng = random.Random(round_ * 100 + i)
        with Queue(dsn, pool_size=1) as q:
            for step in range(30):
                types = ["gpu"] if i % 2 else ["gpu", "cpu"]
                jobs = q.claim(f"w{i}", job_types=types, limit=rng.randint(1, 3))
                mine = [j for j in jobs if j.job_type == "gpu"]
                gpu.add(len(mine))
                others.add(len(jobs) - len(mine))
                q.heartbeat_many([j.lease for j in jobs])  # the "work": another round trip held
                gpu.remove(len(mine))
                others.remove(len(jobs) - len(mine))
                _finish(q, jobs, step + i)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        _run_claimers(work)
    finally:
        stop.set()
        watcher.join()
    print(
        f"\nround {round_}: gpu claimed {gpu.claimed}, peak held {gpu.peak}; cpu claimed {others.claimed}, "
        f"peak {others.peak}; database peak {max(seen_in_db)} over {len(seen_in_db)} readings"
    )
    assert gpu.peak <= limit
    assert max(seen_in_db) <= limit
    assert gpu.peak == limit, "the claimers never filled the limit: the test would prove nothing"
    assert others.peak > limit, "unlimited cpu jobs are not held to gpu's limit"
    assert _running(dsn, "gpu") == 0


def _finish(q: Queue, jobs: list[ClaimedJob], k: int) -> None:
    """Every way out of running, in turn (retries and releases put the job back for another claim)."""
    if not jobs:
        return
    way = k % 4
    if way == 0:
        q.succeed_many([(j.lease, {"ok": True}) for j in jobs])
    for j in jobs if way else ():
        if way == 1:
            q.fail(j.lease, "try again", delay=0)
        elif way == 2:
            q.release(j.lease)
        else:
            q.succeed(j.lease, {"ok": True})


T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_sixteen_claimers_never_claim_more_than_the_rate(dsn: str) -> None:
    """10 a minute: a full bucket of 10 at once, then the refill (5 in 30 s), never more, whoever
    races for it. The clock is fixed (`now`), so each figure is exact."""
    with Queue(dsn) as owner:
        owner.enqueue_many([NewJob("llm", {"n": i}) for i in range(200)], now=T0 - timedelta(hours=1))
        owner.set_limit("llm", rate=Rate(10, 60), now=T0)
    counts = Peak()

    def claim_all(at: datetime) -> Callable[[int], None]:
        def work(i: int) -> None:
            with Queue(dsn, pool_size=1) as q:
                for _ in range(5):
                    jobs = q.claim(f"w{i}", job_types=["llm"], limit=1 + i % 3, now=at)
                    counts.add(len(jobs))
                    q.succeed_many([(j.lease, 1) for j in jobs], now=at)

        return work

    expected = 0
    for at, refill in (
        (T0, 10),
        (T0 + timedelta(seconds=30), 5),
        (T0 + timedelta(seconds=30), 0),
        (T0 + timedelta(seconds=36), 1),
        (T0 + timedelta(hours=2), 10),
    ):
        _run_claimers(claim_all(at))
        # Racing claimers may leave the type out when its row stays locked past a claim's 5 ms
        # (migration 18), so on a loaded machine they can take fewer than the bucket holds; one
        # claimer alone then takes whatever is left. Never more than the rate, in total exactly it.
        with Queue(dsn, pool_size=1) as alone:
            while jobs := alone.claim("drain", job_types=["llm"], limit=3, now=at):
                counts.add(len(jobs))
                alone.succeed_many([(j.lease, 1) for j in jobs], now=at)
        expected += refill
        assert (at, counts.claimed) == (at, expected)


def test_a_crashed_workers_jobs_come_back_with_their_slots_once_reaped(queue: Queue) -> None:
    queue.enqueue_many([NewJob("gpu", {"n": i}) for i in range(5)], now=T0)
    queue.set_limit("gpu", max_running=2, now=T0)
    crashed = queue.claim("dead-pod", job_types=["gpu"], limit=5, lease=10, now=T0)
    assert len(crashed) == 2
    assert queue.claim("live-pod", job_types=["gpu"], limit=5, now=T0 + timedelta(seconds=5)) == []
    reclaimed = queue.reap(now=T0 + timedelta(seconds=60))
    assert sorted(r.id for r in reclaimed) == sorted(j.id for j in crashed)
    again = queue.claim("live-pod", job_types=["gpu"], limit=5, now=T0 + timedelta(seconds=61))
    assert len(again) == 2
    assert [s.running for s in queue.stats(["gpu"], now=T0 + timedelta(seconds=61))] == [2]


def test_a_limited_claim_returns_what_an_unlimited_one_does(queue: Queue) -> None:
    # Both arms of pgwork.claim must set and return the same columns (version 10's timeout too).
    queue.enqueue_many([NewJob("gpu", {"n": 1}, timeout=90), NewJob("cpu", {"n": 1}, timeout=90)], now=T0)
    queue.set_limit("gpu", max_running=1, now=T0)
    (limited,) = queue.claim("pod", job_types=["gpu"], limit=5, now=T0)
    (unlimited,) = queue.claim("pod", job_types=["cpu"], limit=5, now=T0)
    assert limited.timeout == unlimited.timeout == 90
    assert (limited.attempt, limited.lease.owner) == (unlimited.attempt, unlimited.lease.owner) == (1, "pod")


@pytest.mark.parametrize(
    "way_out",
    ["succeed", "succeed_many", "fail_retry", "fail_dead", "fail_many", "release", "cancel", "reap"],
)
def test_every_way_out_of_running_frees_the_slot(queue: Queue, way_out: str) -> None:
    queue.enqueue_many(
        [NewJob("gpu", {"n": i}, max_attempts=1 if way_out == "fail_dead" else 5) for i in range(3)], now=T0
    )
    queue.set_limit("gpu", max_running=1, now=T0)
    [job] = queue.claim("w", job_types=["gpu"], limit=3, lease=30, now=T0)
    assert queue.claim("w", job_types=["gpu"], now=T0) == []
    later = T0 + timedelta(seconds=60)
    if way_out == "succeed":
        queue.succeed(job.lease, 1, now=T0)
    elif way_out == "succeed_many":
        queue.succeed_many([(job.lease, 1)], now=T0)
    elif way_out == "fail_retry":
        queue.fail(job.lease, "x", delay=3600, now=T0)
    elif way_out == "fail_dead":
        queue.fail(job.lease, "x", now=T0)
    elif way_out == "fail_many":
        decision = decide_failure(1, 5, True, 3600, T0)
        queue.fail_many([DecidedFailure(job.lease, decision, "x")], now=T0)
    elif way_out == "release":
        queue.release(job.lease, now=T0)
    elif way_out == "cancel":
        queue.cancel([job.id], now=T0)
        queue.acknowledge_cancel(job.lease, now=T0)
    else:
        queue.reap(now=later)
    [next_job] = queue.claim("w", job_types=["gpu"], limit=3, now=later)
    assert next_job.id != job.id or way_out in ("release", "reap")


def test_an_any_type_claim_keeps_to_the_limits_and_takes_other_types_beside(queue: Queue) -> None:
    queue.enqueue_many([NewJob(t, {"n": i}, priority=p) for i in range(4) for t, p in (("gpu", 1), ("cpu", 9))], now=T0)
    queue.set_limit("gpu", max_running=1, now=T0)
    first = queue.claim("w", limit=3, now=T0)
    assert [j.job_type for j in first] == ["gpu", "cpu", "cpu"]  # priority order, gpu capped at one
    assert [j.job_type for j in queue.claim("w", limit=10, now=T0)] == ["cpu", "cpu"]
    queue.clear_limit("gpu")
    assert [j.job_type for j in queue.claim("w", limit=10, now=T0)] == ["gpu"] * 3


def test_a_limited_claim_refuses_repeatable_read_where_it_would_count_on_an_old_snapshot(dsn: str) -> None:
    with Queue(dsn) as q:
        q.enqueue_many([NewJob("gpu", {}), NewJob("cpu", {})])
        q.set_limit("gpu", max_running=3)
        with psycopg.connect(dsn) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with pytest.raises(psycopg.errors.InvalidTransactionState, match="READ COMMITTED"):
                q.claim("w", job_types=["gpu"], conn=conn)
            conn.rollback()
            assert [j.job_type for j in q.claim("w", job_types=["cpu"], conn=conn)] == ["cpu"]


def test_lowering_a_limit_below_running_lets_them_finish_and_holds_new_claims(queue: Queue) -> None:
    queue.enqueue_many([NewJob("gpu", {"n": i}) for i in range(6)], now=T0)
    queue.set_limit("gpu", max_running=4, now=T0)
    held = queue.claim("w", job_types=["gpu"], limit=6, now=T0)
    assert len(held) == 4
    assert queue.set_limit("gpu", max_running=2, now=T0) is False
    queue.succeed(held[0].lease, 1, now=T0)
    assert queue.claim("w", job_types=["gpu"], now=T0) == []  # 3 running, limit 2
    queue.succeed_many([(j.lease, 1) for j in held[1:3]], now=T0)
    assert len(queue.claim("w", job_types=["gpu"], limit=6, now=T0)) == 1


def test_maintainer_sets_limits_worker_keeps_to_them_and_cannot_change_them(dsn: str, make_role: MakeRole) -> None:
    maintainer, worker, reader = make_role("maintainer"), make_role("worker"), make_role("reader")
    with Queue(maintainer) as m:
        assert m.set_limit("gpu", max_running=1, rate=Rate(60, 60)) is True
    with Queue(worker) as w:
        w.enqueue_many([NewJob("gpu", {}), NewJob("gpu", {"n": 2})])
        assert len(w.claim("w", job_types=["gpu"], limit=2)) == 1
        for call in (lambda: w.set_limit("gpu", max_running=100), lambda: w.clear_limit("gpu")):
            with pytest.raises(Denied):
                call()
        with psycopg.connect(worker) as conn, pytest.raises(Denied):
            conn.execute("UPDATE pgwork.job_limits SET max_running = 100")
        with psycopg.connect(worker) as conn, pytest.raises(Denied):
            conn.execute("SELECT pgwork.claim_limited(NULL, 1, now())")
    with Queue(reader) as r:
        [limit] = r.limits()
        assert (limit.job_type, limit.max_running, limit.rate_count, limit.running) == ("gpu", 1, 60, 1)
        [gpu] = r.stats(["gpu"])
        assert (gpu.max_running, gpu.rate_count, gpu.rate_seconds) == (1, 60, 60.0)
        with pytest.raises(Denied):
            r.set_limit("gpu", max_running=2)
    with Queue(maintainer) as m:
        assert m.clear_limit("gpu") is True
        assert m.clear_limit("gpu") is False


def test_claim_statement_is_the_unlimited_path_alone(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        text = claim_statement(conn)
    # Since migration 23 the statement picks from the ready ring first (WITH picked ...).
    assert text.lstrip().startswith("WITH picked")
    assert "UPDATE pgwork.jobs" in text
    for absent in ("RETURN QUERY", "claim_limited", "job_limits", "chosen"):
        assert absent not in text
    # Each arm its own statement (migration 28): the typed one never reads the any-type arm, and
    # the any-type one takes no types at all.
    assert "job_types IS NULL" not in text and "UNION ALL" not in text
    assert "%(job_types)s" in text
    with psycopg.connect(dsn) as conn:
        any_type = claim_statement(conn, any_type=True)
    assert any_type.lstrip().startswith("WITH picked")
    assert "UPDATE pgwork.jobs" in any_type
    for absent in ("RETURN QUERY", "RETURN;", "claim_limited", "job_limits", "chosen", "UNION ALL", "job_types"):
        assert absent not in any_type
