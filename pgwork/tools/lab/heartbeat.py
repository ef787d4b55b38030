"""Experiment 7: what keeping leases alive costs, in WAL, with many jobs running.

N jobs are claimed by W workers and held; each round every worker renews its leases the way
`pgwork worker` does (one `heartbeat_many` statement, in its own transaction), and the WAL the
round wrote is read from pg_current_wal_lsn(). The same renewals run under four designs:

- `lease index, ff 85`: schema version 3, whose reaper index on lease_expires_at made every
  renewal a non-HOT update (a new row version elsewhere plus an entry in every index);
- `HOT, ff 85` and `HOT, ff 50`: schema version 4 (no index on a column a heartbeat writes) at
  the table's fillfactor and at 50, which leaves a page room for a second version of every row;
- `lease per worker`: the shape procrastinate uses, one row per worker renewed, whatever it holds
  (the baseline: it keeps no per-job expiry, which pgwork's fencing needs);
- `worker lease`: what pgwork does since migration 15, at the table's fillfactor: each worker
  registers before it claims and its heartbeat passes its secret with its leases; the round after
  the checkpoint adopts every job (one write each, once), and the steady rounds renew one row per
  worker for all the jobs it covers, each job's token still checked (a read, no write).

The first round after a CHECKPOINT pays a full-page image for each page it touches; it is
reported on its own, the steady rounds after it as the median. On a server other clients write
to, their WAL counts too: the lab's embedded server (no --dsn) has no other clients.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from pgwork.models import Lease, LeaseState, WorkerLease
from pgwork.tools.lab.labdb import JOB_TYPE, LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome

NAME = "heartbeat"
TODAY = "lease index, ff 85"
HOT = "HOT, ff 85"
WORKER_LEASE = "worker lease"
DESIGNS = (TODAY, HOT, "HOT, ff 50", "lease per worker", WORKER_LEASE)
HEARTBEAT_SECONDS = 10.0  # the worker's default: a third of the 30 s lease


@dataclass(frozen=True)
class Plan:
    running: tuple[int, ...]
    workers: int
    rounds: int  # steady rounds after the one that follows the checkpoint


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(running=(50,), workers=4, rounds=3)
    return Plan(running=(200, 1000), workers=16, rounds=20)


@dataclass
class Tally:
    wal: list[int]
    updated: int = 0
    hot: int = 0
    lost: int = 0
    rows_written: int = 0  # running job rows with a new version, read from xmin after each round


def _prepare(
    lab: LabDatabase, design: str, running: int, workers: int
) -> tuple[dict[str, list[Lease]], dict[str, WorkerLease]]:
    lab.reset()
    lab.run("drop_v1_lease_index")
    lab.run("fillfactor_50" if design == "HOT, ff 50" else "fillfactor_85")
    if design == TODAY:
        lab.run("create_v1_lease_index")
    lab.enqueue(running)
    per_worker = -(-running // workers)
    leases = {}
    registrations = {}
    for w in range(workers):
        owner = f"lab-hb-{w + 1}"
        if design == WORKER_LEASE:  # as the worker does: registered as it starts
            registrations[owner] = lab.queue.register_worker(owner, lease_seconds=300)
        claimed = lab.queue.claim(owner, job_types=[JOB_TYPE], limit=per_worker, lease=300)
        leases[owner] = [c.lease for c in claimed]
    if design == "lease per worker":
        lab.run("create_worker_leases")
        lab.run("fill_worker_leases", {"owners": list(leases)})
    lab.run("vacuum_analyze")  # the steady state autovacuum keeps: the claims' old versions gone
    return leases, registrations


def _round(
    lab: LabDatabase, design: str, leases: dict[str, list[Lease]], registrations: dict[str, WorkerLease], tally: Tally
) -> int:
    xid = int(lab.one("next_xid")["xid"])
    start = str(lab.one("wal_lsn")["lsn"])
    for owner, held in leases.items():
        if design == "lease per worker":
            lab.run("renew_worker_lease", {"owner": owner})
            continue
        with lab.conn.transaction():
            renewal = lab.queue.renew(held, lease_seconds=300, worker=registrations.get(owner), conn=lab.conn)
            states = renewal.states
            counts = lab.one("xact_updates")
        if renewal.registered is False:
            tally.lost += 1  # nobody else registered the name: a lost registration is a failure
        tally.lost += sum(1 for s in states.values() if s is not LeaseState.HELD)
        tally.updated += int(counts["updated"])
        tally.hot += int(counts["hot"])
    wal = int(lab.one("wal_since", {"lsn": start})["bytes"])
    # Not the xact counters: on PostgreSQL 15 they also hold earlier transactions' counts until the
    # backend flushes its statistics, which a busy connection does at most once a second.
    tally.rows_written += int(lab.one("running_rows_written_since", {"xid": xid})["rows"])
    return wal


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    facts = 0
    try:
        for running in p.running:
            today: float | None = None
            hot: float | None = None
            for design in DESIGNS:
                leases, registrations = _prepare(lab, design, running, p.workers)
                held = sum(len(v) for v in leases.values())
                if held != running:
                    violations.append(f"heartbeat: {design}: claimed {held} of {running} jobs")
                lab.run("checkpoint")
                tally = Tally([])
                after_checkpoint = _round(lab, design, leases, registrations, tally)
                tally.updated = tally.hot = tally.rows_written = 0
                for _ in range(p.rounds):
                    tally.wal.append(_round(lab, design, leases, registrations, tally))
                steady = statistics.median(tally.wal)
                if design == TODAY:
                    today = steady
                if design == HOT:
                    hot = steady
                facts += 1
                if tally.lost:
                    violations.append(f"heartbeat: {design}: {tally.lost} renewals lost a lease nobody else took")
                x = f"{running} running"
                out += [
                    Measurement(NAME, design, x, "WAL per round", round(steady), "B"),
                    Measurement(NAME, design, x, "WAL per round after a checkpoint", after_checkpoint, "B"),
                    Measurement(NAME, design, x, "WAL/s at a 10 s heartbeat", round(steady / HEARTBEAT_SECONDS), "B/s"),
                    Measurement(NAME, design, x, "WAL per job per round", round(steady / running), "B"),
                ]
                if design not in ("lease per worker", WORKER_LEASE):
                    share = 100.0 * tally.hot / tally.updated if tally.updated else 0.0
                    out.append(Measurement(NAME, design, x, "HOT renewals", round(share, 1), "%"))
                if design == WORKER_LEASE:  # job rows written per round: none while every job is covered
                    rows = tally.rows_written / p.rounds
                    out.append(Measurement(NAME, design, x, "job rows written per round", round(rows, 1), "rows"))
                if today:
                    out.append(Measurement(NAME, design, x, "of today's WAL", round(100.0 * steady / today, 1), "%"))
                if hot and design == WORKER_LEASE:
                    out.append(Measurement(NAME, design, x, "of HOT, ff 85's WAL", round(100.0 * steady / hot, 1), "%"))
                say(f"heartbeat {design}, {running} running: {steady:,.0f} B/round ({after_checkpoint:,} first)")
    finally:
        lab.run("drop_v1_lease_index")
        lab.run("fillfactor_85")
    return Outcome(out, violations, facts)
