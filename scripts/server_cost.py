"""The server's CPU per job of pgwork's claim and succeed_many at batch 100, apart, and what each
piece of the finish costs (issue 28).

    python scripts/server_cost.py [--jobs 20000] [--rounds 3]

On a PostgreSQL started for this script alone (embedded), one connection enqueues `--jobs` trivial
jobs, then claims them all 100 at a time (phase `claim`), then finishes them all with succeed_many
100 at a time (phase `succeed`). Each phase's CPU is the backend's own, read from /proc before and
after (the client's decoding is not in it; nor is the WAL writer's or autovacuum's). Variants of
the finish run in turn within each round, each on emptied, VACUUMed tables: `as is`, and with the
per-row completion NOTIFY trigger disabled (its cost: one plpgsql call and one pg_notify per
finished job). `--listeners N` adds N idle connections LISTENing on pgwork_jobs, as each worker
keeps one, and prints their backends' CPU per job beside: every commit that notified wakes each of
them to read the queued notifications, whatever the channel. Median [min-max] over rounds.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import psycopg

from pgwork.db import Queue
from pgwork.models import ClaimedJob, Completion, NewJob
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.proccpu import proc_cpu as cpu

TRIGGER = "jobs_notify_finished"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument(
        "--listeners", type=int, default=0, help="idle connections LISTENing on pgwork_jobs, as each worker keeps"
    )
    args = parser.parse_args()
    figures: dict[str, list[float]] = {}
    with (
        LabDatabase(None, "pgwork_lab_server_cost") as lab,
        Queue(lab.dsn, pool_size=1, application_name="pgwork-server-cost") as queue,
        psycopg.connect(lab.dsn, autocommit=True) as admin,
    ):
        # Each worker's wake-up connection: idle, LISTENing on another channel than the finishes'.
        # PostgreSQL wakes every listening backend of the database at each commit that notified,
        # and each reads the queued notifications through, whatever their channel.
        listeners = [
            psycopg.connect(lab.dsn, autocommit=True, application_name="pgwork-cost-listener")
            for _ in range(args.listeners)
        ]
        for conn in listeners:
            conn.execute("LISTEN pgwork_jobs")

        def listener_pids() -> list[int]:
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgwork-cost-listener'"
            ).fetchall()
            return [int(r[0]) for r in rows]

        def backend() -> int:
            # The queue's pool has one connection: every call runs on this backend.
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgwork-server-cost'"
            ).fetchone()
            assert row is not None
            return int(row[0])

        def trigger(on: bool) -> None:
            admin.execute(f"ALTER TABLE pgwork.jobs {'ENABLE' if on else 'DISABLE'} TRIGGER {TRIGGER}")

        def phase(name: str, step: Callable[[], bool]) -> None:
            pid, others = backend(), listener_pids()
            before, heard = cpu(pid), sum(cpu(p) for p in others)
            while step():
                pass
            figures.setdefault(name, []).append((cpu(pid) - before) * 1e6 / args.jobs)
            if others:
                spent = sum(cpu(p) for p in others) - heard
                figures.setdefault(f"{name}, {len(others)} listeners", []).append(spent * 1e6 / args.jobs)

        def variant(label: str, notify: bool) -> None:
            lab.reset()
            trigger(notify)
            queue.enqueue_many([NewJob("noop", {"n": n}) for n in range(args.jobs)])
            lab.analyze()
            held: list[ClaimedJob] = []

            def claim() -> bool:
                got = queue.claim("cost", job_types=["noop"], limit=args.batch, lease=600)
                held.extend(got)
                return bool(got)

            phase(f"claim ({label})", claim)
            batches = [held[i : i + args.batch] for i in range(0, len(held), args.batch)]

            def succeed() -> bool:
                if not batches:
                    return False
                done = queue.succeed_many([(j.lease, {"ok": True}) for j in batches.pop()])
                if any(o is not Completion.CREATED for o in done.values()):
                    raise SystemExit("a fenced completion did not write its result")
                return True

            phase(f"succeed_many ({label})", succeed)

        for _ in range(args.rounds):
            variant("as is", True)
            variant("no finished NOTIFY", False)
        trigger(True)
        for conn in listeners:
            conn.close()
    print(
        f"server CPU per job (us), {args.jobs} jobs, batch {args.batch}, {args.rounds} rounds: the working "
        f"backend's own, and the listening backends' together ({args.listeners} listeners)"
    )
    for name, values in figures.items():
        print(f"  {name:<36} {statistics.median(values):6.1f} [{min(values):.1f}-{max(values):.1f}]")


if __name__ == "__main__":
    main()
