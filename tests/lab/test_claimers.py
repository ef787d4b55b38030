"""The lab's claim-strategy processes get their DSN through multiprocessing, never on a command line."""

from __future__ import annotations

from pathlib import Path

import psycopg

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.tools.lab.claimers import ClaimerFleet, ClaimerSpec, preload
from pgwork.tools.lab.labdb import JOB_TYPE

SECRET = "claimer-t3st-s3cret"


def test_claimer_processes_show_no_dsn_on_their_command_line(queue: Queue) -> None:
    # The test server trusts local connections: the password is carried, never checked.
    dsn = psycopg.conninfo.make_conninfo(queue.dsn, password=SECRET)
    queue.enqueue_many([NewJob(JOB_TYPE, {"n": n}) for n in range(2)])
    preload()
    # One-second jobs keep both processes alive (and connected) while their argv is read.
    specs = [ClaimerSpec(dsn, f"argv-{i}", "skiplocked", 1.0, 60.0) for i in range(2)]
    fleet = ClaimerFleet(specs)
    cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in fleet.pids]
    reports = fleet.wait()
    assert len(cmdlines) == 2 and all(cmdlines), cmdlines
    assert not any(SECRET.encode() in c or b"dbname" in c for c in cmdlines), cmdlines
    assert sorted(j for r in reports for j in r.executed) == [1, 2]  # they did connect, with that DSN
