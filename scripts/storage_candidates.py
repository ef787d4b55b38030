"""Storage candidates under a held vacuum horizon (issue 23), on the embedded PostgreSQL 18.

What a held snapshot costs the claim is the dead index entries it walks; that count does not depend
on how loaded the machine is, while claim latency on a shared two-core machine does (a timed loop
gave 4-16 ms p50 under load average 10-40). So each candidate churns jobs through the queue (enqueue
1,000, claim them, finish them, repeated) while another session holds a REPEATABLE READ snapshot
that read (a) the candidate's jobs table or (b) only another table, or (c) nobody holds one ((r):
one that read pgwork.ready, the ring itself, once it exists); every
`--every` jobs it VACUUMs the hot table (what remains is what the snapshot keeps) and EXPLAINs
(ANALYZE, BUFFERS) one claim, rolled back: the buffers it touched and its
time (median of 5). Candidates:

  A  pgwork as installed; pgwork.claim's statement (read back from the installed function);
     churned through Queue.claim / succeed_many. Since migration 23 that is the ready ring, rotated
     every `--rotate` jobs by pgwork.rotate_ready at the real time (run the script of an older
     checkout for the one-table layout)
  B  a small hot table for pending/running; a finish DELETEs the row and INSERTs it into a
     history table partitioned by time
  C  the hot set in a ring of 8 list partitions ("segments"): enqueue writes the current one, the
     claim reads only the open ones (those that may hold pending jobs), a finish moves the row to
     history as in B; every `--rotate` jobs the ring advances, closes drained segments and
     TRUNCATEs empty ones (lock_timeout 50 ms: a snapshot that read a segment blocks it)

and the retention question: dropping a history partition of `--history` rows against pgwork's
batched prune deleting as many. Prototypes in storage_candidates.sql; never installed by pgwork.

    python scripts/storage_candidates.py [--churn 30000] [--every 10000] [--rotate 5000] [--cases cba]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import errors, sql

from pgwork import embedded, sql_files
from pgwork.db import Queue, claim_statement, migrate

Q = sql_files.parse_queries(Path(__file__).with_name("storage_candidates.sql").read_text(encoding="utf-8"))
RING = 8
# Case (r), pgwork's ready ring only: a report that read the ring itself holds every segment.
READ_READY = "SELECT count(*) FROM pgwork.ready"


class Candidate:
    """A: pgwork as installed."""

    name = "A pgwork today (one table)"
    read_jobs = "SELECT count(*) FROM pgwork.jobs"
    vacuum = "VACUUM pgwork.jobs"
    truncated = 0
    blocked = 0

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.q = Queue(dsn, pool_size=1, application_name="cand-a")
        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
        self.conn.execute("TRUNCATE pgwork.jobs, pgwork.job_results, pgwork.job_edges")
        self.statement = claim_statement(self.conn)
        self.held: list[Any] = []
        self.truncated = 0
        self.blocked = 0
        if self.rotates:
            self.name = "A pgwork as installed (ready ring, migration 23)"
            self.vacuum = "VACUUM pgwork.jobs, pgwork.ready"

    def enqueue(self, n: int) -> None:
        self.conn.execute(Q["a_enqueue"], {"n": n})

    def claim_many(self, n: int) -> None:
        self.held = [j.lease for j in self.q.claim("churn", job_types=["bench"], limit=n)]

    def finish_all(self) -> None:
        self.q.succeed_many([(lease, {"ok": True}) for lease in self.held])
        self.held = []

    def measure(self) -> tuple[int, float]:
        params = {"owner": "probe", "job_types": ["bench"], "limit": 1, "lease": 30.0, "now": None}
        return explain(self.conn, self.statement, params)

    def maintain(self) -> None:
        # Since migration 23 pgwork rotates its ready ring itself (workers, the reaper): as they
        # would, at the real time, so the current segment holds whatever churned in its 10 s.
        if self.rotates:
            for r in self.q.rotate_ready():
                if r.outcome == "truncated":
                    self.truncated += 1
                else:
                    self.blocked += 1

    @property
    def rotates(self) -> bool:
        return self.conn.execute("SELECT to_regproc('pgwork.rotate_ready') IS NOT NULL").fetchone() == (True,)

    def dead(self) -> int:
        row = self.conn.execute(
            "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
            " WHERE schemaname = 'pgwork' AND (relname = 'jobs' OR relname LIKE 'ready%')"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.q.close()
        self.conn.close()


class HotTable(Candidate):
    """B: hot table + history."""

    name = "B hot table + history"
    prefix = "b"
    read_jobs = Q["b_read"]
    vacuum = "VACUUM cand_b.live"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
        self.conn.execute(Q[f"{self.prefix}_setup"])

    def enqueue(self, n: int) -> None:
        self.conn.execute(Q[f"{self.prefix}_enqueue"], {"n": n})

    def claim_many(self, n: int) -> None:
        self.conn.execute(Q["b_claim_many"], {"n": n})

    def finish_all(self) -> None:
        self.conn.execute(Q[f"{self.prefix}_finish_all"])

    def measure(self) -> tuple[int, float]:
        return explain(self.conn, Q["b_claim"], {})

    def dead(self) -> int:
        row = self.conn.execute(Q[f"{self.prefix}_dead"]).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


class Segments(HotTable):
    """C: a ring of truncated segments."""

    name = "C segments (ring of 8, truncated)"
    prefix = "c"
    read_jobs = Q["c_read"]
    vacuum = "VACUUM cand_c.live"

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.maint = psycopg.connect(dsn, autocommit=True)
        self.open: list[int] = [0]
        self.truncated = 0
        self.blocked = 0

    def claim_many(self, n: int) -> None:
        self.conn.execute(Q["c_claim_many"], {"n": n, "open": self.open})

    def measure(self) -> tuple[int, float]:
        return explain(self.conn, Q["c_claim"], {"open": self.open})

    def maintain(self) -> None:
        m = self.maint
        current, opened = m.execute(Q["c_ring"]).fetchone() or (0, [0])
        nxt = (current + 1) % RING
        if m.execute(f"SELECT NOT EXISTS (SELECT 1 FROM cand_c.live_{nxt})").fetchone() == (True,):  # noqa: S608 - an int
            m.execute(Q["c_advance"], {"next": nxt})
        current, opened = m.execute(Q["c_ring"]).fetchone() or (0, [0])
        for seg in [s for s in opened if s != current]:
            ask = f"SELECT EXISTS (SELECT 1 FROM cand_c.live_{seg} WHERE status = 'pending')"  # noqa: S608 - an int
            pending = m.execute(ask).fetchone()
            if pending == (False,):
                m.execute(Q["c_close"], {"seg": seg})
        current, opened = m.execute(Q["c_ring"]).fetchone() or (0, [0])
        for seg in range(RING):
            if seg == current or seg in opened:
                continue
            empty = m.execute(f"SELECT EXISTS (SELECT 1 FROM cand_c.live_{seg})").fetchone()  # noqa: S608 - an int
            if empty == (False,):
                try:
                    with m.transaction():
                        m.execute("SET LOCAL lock_timeout = '50ms'")
                        m.execute(f"TRUNCATE cand_c.live_{seg}")
                    self.truncated += 1
                except errors.LockNotAvailable:
                    self.blocked += 1
        self.open = list(m.execute(Q["c_ring"]).fetchone()[1])  # type: ignore[index]

    def close(self) -> None:
        super().close()
        self.maint.close()


def explain(conn: psycopg.Connection[Any], statement: LiteralString, params: dict[str, Any]) -> tuple[int, float]:
    """Buffers (shared hit + read) and milliseconds of one claim, rolled back; median of 5."""
    found: list[tuple[int, float]] = []
    for _ in range(5):
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + sql.SQL(statement), params
            ).fetchone()
        plan = row[0][0] if row else {}
        top = plan["Plan"]
        found.append((int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]), float(plan["Execution Time"])))
    found.sort()
    return found[2]


def churn(cand: Candidate, n: int) -> None:
    cand.enqueue(n)
    cand.claim_many(n)
    cand.finish_all()


def measure(make: Callable[[str], Candidate], dsn: str, case: str, args: argparse.Namespace) -> None:
    cand = make(dsn)
    cand.enqueue(200)  # a standing backlog: the claim always finds work
    holder = None
    if case != "c":
        holder = psycopg.connect(dsn, application_name="cand-report")
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute(cand.read_jobs if case == "a" else READ_READY if case == "r" else Q["other_read"])
    cells = []
    done = 0
    next_rotate = args.rotate
    while True:
        if done % args.every == 0:
            # Vacuum as eager as it can be first: what is left is what the held snapshot keeps.
            cand.conn.execute(cand.vacuum)
            buffers, ms = cand.measure()
            cells.append(f"{done // 1000}k: {buffers} buf {ms:.2f} ms")
        if done >= args.churn:
            break
        churn(cand, 1000)
        done += 1000
        if done >= next_rotate:
            cand.maintain()
            next_rotate += args.rotate
    dead = cand.dead()
    if holder is not None:
        holder.rollback()
        holder.close()
    extra = f"; truncated {cand.truncated}, blocked {cand.blocked}" if cand.truncated or cand.blocked else ""
    print(f"| {cand.name} | ({case}) | " + " | ".join(cells) + f" | dead {dead}{extra} |", flush=True)
    cand.close()


def retention(dsn: str, rows: int) -> None:
    """DROP of one history partition against pgwork's batched prune of as many rows."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA IF EXISTS ret CASCADE; CREATE SCHEMA ret")
        c.execute("CREATE TABLE ret.history (id bigint, completed_at timestamptz NOT NULL, payload jsonb) "
                  "PARTITION BY RANGE (completed_at)")  # fmt: skip
        c.execute("CREATE TABLE ret.h_old PARTITION OF ret.history FOR VALUES FROM ('2000-01-01') TO ('2000-01-02')")
        c.execute("CREATE TABLE ret.h_new PARTITION OF ret.history FOR VALUES FROM ('2000-01-02') TO (MAXVALUE)")
        c.execute("INSERT INTO ret.history SELECT g, '2000-01-01'::timestamptz + g * interval '1 ms', '{}' "
                  "FROM generate_series(1, %s) g", (rows,))  # fmt: skip
        t0 = time.perf_counter()
        c.execute("ALTER TABLE ret.history DETACH PARTITION ret.h_old")
        c.execute("DROP TABLE ret.h_old")
        drop = time.perf_counter() - t0
        c.execute("INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, completed_at, idempotency_key) "
                  "SELECT 'old', '{}', 'succeeded', 1, now() - interval '30 days', 'old-' || g "
                  "FROM generate_series(1, %s) g", (rows,))  # fmt: skip
        c.execute("VACUUM ANALYZE pgwork.jobs")
    with Queue(dsn, pool_size=1) as q:
        t0 = time.perf_counter()
        pruned = q.prune(timedelta(days=1))
        prune = time.perf_counter() - t0
    print(f"retention of {rows:,} finished rows: detach + drop partition {drop * 1000:.1f} ms; "
          f"pgwork prune (batched DELETE) {prune:.2f} s ({pruned} rows)", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--churn", type=int, default=30_000)
    p.add_argument("--every", type=int, default=10_000)
    p.add_argument("--rotate", type=int, default=5_000)
    p.add_argument("--history", type=int, default=1_000_000)
    p.add_argument("--cases", default="cba")
    p.add_argument("--only", default="ABC")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pgwork-cand-"))
    server = embedded.start(tmp / "data", delete_on_exit=True)
    try:
        admin = embedded.admin_dsn(server)
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("CREATE DATABASE cand")
            version = c.execute("SHOW server_version").fetchone()
        dsn = str(server.get_uri(database="cand"))
        migrate(dsn)
        server_version = version[0] if version else "?"
        print(
            f"PostgreSQL {server_version} (embedded, autovacuum on); buffers and ms of one claim after N jobs churned"
        )
        makers: dict[str, Callable[[str], Candidate]] = {"A": Candidate, "B": HotTable, "C": Segments}
        for case in args.cases:
            for key in args.only:
                measure(makers[key], dsn, case, args)
        if args.history:
            retention(dsn, args.history)
    finally:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
