"""The lab's run: 16 worker processes, 400 jobs of 200 ms, exactly 400 claims; and the tools' fleet helper."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.tools.fleet import PACKAGE_ROOT, WorkerFleet, worker_env
from tests.support.cli import APPS
from tests.support.waiting import wait_for
from tests.support.workers import Spawn


@pytest.mark.slow
def test_sixteen_workers_four_hundred_jobs_one_claim_each(queue: Queue, spawn_worker: Spawn) -> None:
    queue.enqueue_many([NewJob("sleep", {"seconds": 0.2, "n": n}) for n in range(400)])
    # Polling only, to keep the fleet at three connections per process on a shared server.
    workers = [spawn_worker("--burst", "--no-listen", "--poll", "0.1s") for _ in range(16)]
    codes = [w.wait(120) for w in workers]
    assert codes == [0] * 16, [w.log()[-2000:] for w, c in zip(workers, codes, strict=True) if c]
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), sum(attempt_count),"
            " count(DISTINCT lease_owner) FROM pgwork.jobs"
        ).fetchone()
        results = conn.execute("SELECT count(*), count(DISTINCT job_id) FROM pgwork.job_results").fetchone()
    assert row is not None and results is not None
    jobs, succeeded, claims, owners = row
    assert (jobs, succeeded, claims) == (400, 400, 400)
    assert owners > 1
    assert tuple(results) == (400, 400)


# -- the tools' fleet helper (pgwork/tools/fleet.py): the DSN travels in the environment --------

SECRET = "fleet-t3st-s3cret"


def _with_secret(dsn: str) -> str:
    # The test server trusts local connections, so the password is carried but never checked.
    return psycopg.conninfo.make_conninfo(dsn, password=SECRET)


def test_the_fleets_command_line_never_holds_the_dsn(tmp_path: Path) -> None:
    dsn = _with_secret("postgresql://pgwork@db.internal:5432/app")
    fleet = WorkerFleet(dsn, "some.app", tmp_path, ("--concurrency", "2"))
    command = fleet.command("w1", "--burst")
    assert command[1:] == [
        "-m", "pgwork.cli", "worker", "--app", "some.app", "--id", "w1", "--metrics-port", "0", "--concurrency", "2",
        "--burst",
    ]  # fmt: skip
    assert not any(SECRET in part or "db.internal" in part or "--dsn" in part for part in command)
    assert fleet.env["DATABASE_URL"] == dsn


def test_worker_env_isolated_drops_libpq_variables_and_keeps_our_package_first() -> None:
    base = {"PGPASSWORD": "x", "PGHOST": "elsewhere", "HOME": "/home/u", "PYTHONPATH": "/theirs"}
    env = worker_env("dbname=a", isolated=True, pythonpath=("/apps",), base=base)
    assert "PGPASSWORD" not in env and "PGHOST" not in env and env["HOME"] == "/home/u"
    assert env["DATABASE_URL"] == "dbname=a"
    assert env["PYTHONPATH"].split(os.pathsep) == [PACKAGE_ROOT, "/apps", "/theirs"]
    kept = worker_env("dbname=a", base=base)
    assert kept["PGHOST"] == "elsewhere"  # not isolated: a partial DSN may lean on PG* (the demo's case)


def test_a_fleet_worker_connects_through_the_environment_with_nothing_on_argv(queue: Queue, tmp_path: Path) -> None:
    job_id = queue.enqueue("noop", {"n": 1})
    with WorkerFleet(_with_secret(queue.dsn), "pgwork_test_app", tmp_path, pythonpath=(str(APPS),)) as fleet:
        worker = fleet.start("fleet-w1", "--no-listen", "--poll", "0.1s")
        # What `ps` shows every local user: the command line, read once the child has exec'd.
        cmdline = wait_for(
            lambda: (parts := Path(f"/proc/{worker.pid}/cmdline").read_bytes().split(b"\0")) and b"pgwork.cli" in parts
            and parts, 30, what="the worker's exec",
        )  # fmt: skip
        assert not any(SECRET.encode() in part for part in cmdline), cmdline
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
        assert b"DATABASE_URL=" + _with_secret(queue.dsn).encode() in environ
        row = wait_for(lambda: (r := queue.job(job_id)) and r.status == "succeeded" and r, 60, what="the job")
        result = queue.result(row.idempotency_key)
        assert result is not None and result.produced_by == "fleet-w1"
        assert fleet.stop_all() == {"fleet-w1": 0}, worker.log()[-2000:]
    assert SECRET not in worker.log()


def test_kill_is_sigkill_and_a_name_cannot_run_twice(queue: Queue, tmp_path: Path) -> None:
    with WorkerFleet(queue.dsn, "pgwork_test_app", tmp_path, pythonpath=(str(APPS),)) as fleet:
        fleet.start("fleet-k", "--no-listen")
        with pytest.raises(ValueError, match="already running"):
            fleet.start("fleet-k")
        assert fleet.kill("fleet-k") == -signal.SIGKILL
        assert not fleet["fleet-k"].alive()
        fleet.start("fleet-k", "--no-listen")  # the name is free again once its process is gone
        assert fleet["fleet-k"].alive()
