"""What one type's backlog costs the claim, before and after migration 29.

    python scripts/jit_backlog.py --dsn postgresql://postgres@127.0.0.1:5432/postgres [--backlogs 100000,300000,600000]

In a database of its own on `--dsn`'s server (migrated to the current schema, dropped afterwards)
`other`, a type with a few pending jobs, is enqueued first; then one type's backlog (`bulk`) grows
step by step to each `--backlogs` figure, enqueued later, so it fills a ring segment of its own
(each step is one statement: one segment). At each step the script ANALYZEs as autovacuum would
and times claims of one job (each its own transaction, committed, as a worker sends them) for
`bulk` itself and for `other`, the team beside the backlog. Each round times them twice,
interleaved: as migration 29 leaves the schema, and as before it (every function's `jit` reset to
the server's, on by default, and the segments' n_distinct override reset, then ANALYZE again).
Milliseconds a claim, median of the rounds' medians [min-max], client clock around each call.
On a server built without LLVM (`SELECT pg_jit_available()`; the embedded one) nothing can be
compiled, and only the index choice differs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from pgwork.tools.lab.labdb import LabDatabase, wait_for_next_segment

SET_ALL = """
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace = 'pgwork'::regnamespace AND p.prokind IN ('f', 'p')
    LOOP
        EXECUTE format('ALTER FUNCTION %s {action}', f);
    END LOOP;
END
$$"""
SEGMENTS = """
DO $$
DECLARE s regclass;
BEGIN
    FOR s IN SELECT i.inhrelid::regclass FROM pg_catalog.pg_inherits AS i WHERE i.inhparent = 'pgwork.ready'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN job_type {action}', s);
    END LOOP;
END
$$"""
VARIANTS = {
    "29": ("SET jit = off", "SET (n_distinct = -1)"),
    "before": ("RESET jit", "RESET (n_distinct)"),
}
CLAIM = "SELECT * FROM pgwork.claim('jit-bench', ARRAY[%s], 1, 60)"


def claims(conn: psycopg.Connection[tuple[object, ...]], job_type: str, count: int) -> float:
    """Median milliseconds of `count` one-job claims, each committed (autocommit)."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        rows = conn.execute(CLAIM, (job_type,)).fetchall()
        times.append((time.perf_counter() - start) * 1e3)
        assert len(rows) == 1, f"no {job_type} job left to claim"
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a server, best one built with LLVM (default: an embedded one, built without)")
    parser.add_argument("--backlogs", default="100000,300000,600000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--claims", type=int, default=30, help="claims per type, variant and round")
    args = parser.parse_args()
    backlogs = sorted(int(b) for b in args.backlogs.split(","))
    with LabDatabase(args.dsn, "pgwork_lab_jit_backlog") as lab, psycopg.connect(lab.dsn, autocommit=True) as conn:
        settings = "SELECT pg_jit_available(), current_setting('jit'), current_setting('jit_above_cost')"
        row = conn.execute(settings).fetchone()
        assert row is not None
        version = conn.execute("SHOW server_version").fetchone()
        print(
            f"server {version[0] if version else '?'}; JIT available: {row[0]}; "
            f"session jit = {row[1]}, jit_above_cost = {row[2]}"
        )
        print("| bulk backlog | claim of bulk, 29 | before 29 | claim of other, 29 | before 29 |")
        print("|---|---|---|---|---|")
        have, other_needed = 0, 2 * args.rounds * args.claims * len(backlogs)
        conn.execute(
            "INSERT INTO pgwork.jobs (job_type, payload, idempotency_key) "
            "SELECT 'other', '{}', 'o-' || g FROM generate_series(1, %s::integer) AS g",
            (other_needed + 20,),
        )
        # The backlog comes in a later 10 s segment than `other`'s jobs, as it would a while after.
        wait_for_next_segment(conn)
        for backlog in backlogs:
            conn.execute(
                "INSERT INTO pgwork.jobs (job_type, payload, idempotency_key) "
                "SELECT 'bulk', '{}', 'b-' || g FROM generate_series(%s::integer, %s::integer) AS g",
                (have + 1, backlog),
            )
            have = backlog
            conn.execute("VACUUM pgwork.jobs")
            figures: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for variant, (jit, n_distinct) in VARIANTS.items():
                    conn.execute(SET_ALL.format(action=jit))  # type: ignore[arg-type]
                    conn.execute(SEGMENTS.format(action=n_distinct))  # type: ignore[arg-type]
                    conn.execute("ANALYZE pgwork.ready")
                    for job_type in ("bulk", "other"):
                        figures.setdefault((job_type, variant), []).append(claims(conn, job_type, args.claims))
            cells = []
            for key in (("bulk", "29"), ("bulk", "before"), ("other", "29"), ("other", "before")):
                values = figures[key]
                cells.append(f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]")
            print(f"| {backlog:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
