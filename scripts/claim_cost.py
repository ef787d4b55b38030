"""Where a one-job claim + finish spends its time, statement by statement, on one connection.

Prices each cost of pgwork's job-life functions alone: the reference design's bare statements
(a SKIP LOCKED claim, an unfenced completion), the installed pgwork.claim / pgwork.succeed_many,
version 12's functions copied word for word, and variants that drop one cost at a time (the
`SET plan_cache_mode`, every SET clause, SECURITY DEFINER, the probe of pgwork.job_limits, the
UNION ALL of both arms, plpgsql itself), plus the same statements sent directly. Variants that
drop a guarantee (the search_path, the limits) are measurements, never candidates.

Every row claims one job and finishes it, each in its own explicit transaction, exactly as the
worker does (`BEGIN; claim; COMMIT`, `BEGIN; succeed_many; COMMIT`), timing the statement and
its COMMIT apart. Rows are interleaved call by call with the order rotating, so load on a
shared machine falls on all alike; figures are the median and p10 over --rounds cycles, in
milliseconds on the client (so they include one loopback round trip each). synchronous_commit
stays whatever the server says: a commit here is as durable as the worker's.

    python scripts/claim_cost.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--rounds 1500]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from pgwork import sql_files
from pgwork.db import migrate
from pgwork.dsn import with_dbname
from pgwork.tools.lab import query

VARIANTS = sql_files.parse_queries((Path(__file__).with_name("claim_cost.sql")).read_text(encoding="utf-8"))
JOB_TYPE = "bench"
SEARCH_PATH = "SET search_path = pg_catalog, pgwork, pg_temp"
GENERIC = "SET plan_cache_mode = force_generic_plan"
# The functions' arguments, as the direct statements pass them.
_DIRECT = {
    "owner": "(%(owner)s::text)",
    "job_types": "(%(job_types)s::text[])",
    "max_jobs": "(%(limit)s::integer)",
    "lease_seconds": "(%(lease)s::float8)",
    "now_": "now()",
    "job_ids": "(%(ids)s::bigint[])",
    "tokens": "(%(tokens)s::uuid[])",
    "results": "(%(results)s::jsonb[])",
}
_DIRECT_NAMES = re.compile(r"(?<![\w.])(" + "|".join(_DIRECT) + r")(?!\w)")
CLAIM_CALL = (
    "SELECT * FROM pgwork.{}(%(owner)s::text, %(job_types)s::text[], %(limit)s::integer, %(lease)s::float8, NULL)"
)
SUCCEED_CALL = "SELECT * FROM pgwork.{}(%(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[], NULL)"


@dataclass(frozen=True)
class Function:
    """One variant to install: pgwork.cc_<name>, from a signature and a body block."""

    name: str
    signature: str
    body: str
    language: str = "plpgsql"
    definer: bool = True
    sets: tuple[str, ...] = (SEARCH_PATH,)

    def ddl(self) -> str:
        header = f"LANGUAGE {self.language} VOLATILE {'SECURITY DEFINER' if self.definer else ''} {' '.join(self.sets)}"
        return (
            f"CREATE FUNCTION pgwork.cc_{self.name}{VARIANTS[self.signature]}\n{header}\n"
            f"AS $cc$\n{_strip(VARIANTS[self.body])}\n$cc$"
        )


COLUMNS = ("claim", "claim commit", "finish", "finish commit")


@dataclass
class Row:
    label: str
    claim: str  # a statement with %(owner)s ... placeholders
    finish: str  # one with %(ids)s ... (or %(id)s for the bare completion)
    typed: bool = True
    bare: bool = False
    generic: bool = False  # sent on a session with plan_cache_mode = force_generic_plan
    # The previous job's finish and the next claim in one transaction (one commit a job): not
    # what pgwork does (a failed claim must not undo finishes), priced to show what a commit costs.
    one_commit: bool = False
    carry: dict[str, Any] | None = None
    times: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in COLUMNS})
    pgbench: dict[str, float] = field(default_factory=dict)


def _strip(body: str) -> str:
    # The blocks' leading comment lines say what the variant is; the function body starts after.
    lines = body.splitlines()
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(lines)


def _direct(body: str) -> str:
    """A function body's one statement sent directly, its arguments as placeholders."""
    text = re.sub(r"--[^\n]*", "", _strip(body)).strip()
    if "RETURN QUERY" in text:  # plpgsql: its last statement
        text = text.rsplit("RETURN QUERY", 1)[1].rsplit("END", 1)[0]
    text = text.strip().rstrip(";")
    return _DIRECT_NAMES.sub(lambda m: _DIRECT[m.group(1)], text)


def functions() -> list[Function]:
    claim, succeed = "claim_signature", "succeed_signature"
    both = (SEARCH_PATH, GENERIC)
    return [
        Function("claim_v12", claim, "claim_v12", sets=both),
        Function("claim_v12_nogeneric", claim, "claim_v12"),
        Function("claim_v12_generic_only", claim, "claim_v12", sets=(GENERIC,)),
        Function("claim_v12_invoker_generic", claim, "claim_v12", definer=False, sets=(GENERIC,)),
        Function("claim_bare", claim, "claim_bare"),
        Function("claim_bare_invoker", claim, "claim_bare", definer=False, sets=()),
        Function("claim_noprobe", claim, "claim_noprobe", sets=both),
        Function("claim_ifarm", claim, "claim_ifarm", sets=both),
        Function("claim_sql", claim, "claim_sql", language="sql"),
        Function("succeed_v12", succeed, "succeed_v12"),
        Function("succeed_v12_generic", succeed, "succeed_v12", sets=both),
        Function("succeed_v12_generic_only", succeed, "succeed_v12", sets=(GENERIC,)),
        Function("succeed_v12_invoker_generic", succeed, "succeed_v12", definer=False, sets=(GENERIC,)),
        Function("succeed_join", succeed, "succeed_join"),
        Function("succeed_join_generic", succeed, "succeed_join", sets=both),
        Function("succeed_bare", succeed, "succeed_bare"),
        Function("succeed_bare_invoker", succeed, "succeed_bare", definer=False, sets=()),
        Function("succeed_sql", succeed, "succeed_sql", language="sql"),
        Function("succeed_leftjoin", succeed, "succeed_leftjoin"),
    ]


def rows(only: set[str] | None) -> list[Row]:
    def claim(name: str) -> str:
        return CLAIM_CALL.format(name)

    def succeed(name: str) -> str:
        return SUCCEED_CALL.format(name)

    v12 = succeed("cc_succeed_v12")
    every = [
        Row("bare statements (reference loop)", query("skiplocked_claim"), query("complete"), typed=False, bare=True),
        Row(
            "bare, pgwork's columns and arguments",
            _direct(VARIANTS["claim_bare"]),
            _direct(VARIANTS["succeed_bare"]),
            typed=False,
        ),
        Row("installed pgwork.claim + succeed_many", claim("claim"), succeed("succeed_many")),
        Row("installed, untyped claim", claim("claim"), succeed("succeed_many"), typed=False),
        Row("v12 copy", claim("cc_claim_v12"), v12),
        Row("v12 statements sent directly", _direct(VARIANTS["claim_noprobe"]), _direct(VARIANTS["succeed_sql"])),
        Row(
            "v12 statements direct, generic plans",
            _direct(VARIANTS["claim_noprobe"]),
            _direct(VARIANTS["succeed_sql"]),
            generic=True,
        ),
        Row("bare in plpgsql, DEFINER + search_path", claim("cc_claim_bare"), succeed("cc_succeed_bare"), typed=False),
        Row(
            "bare in plpgsql, INVOKER, no SET",
            claim("cc_claim_bare_invoker"),
            succeed("cc_succeed_bare_invoker"),
            typed=False,
        ),
        Row("v12 + SET plan_cache_mode on succeed", claim("cc_claim_v12"), succeed("cc_succeed_v12_generic")),
        Row(
            "v12 - SET search_path (generic kept)",
            claim("cc_claim_v12_generic_only"),
            succeed("cc_succeed_v12_generic_only"),
        ),
        Row(
            "v12 - search_path - DEFINER (generic kept)",
            claim("cc_claim_v12_invoker_generic"),
            succeed("cc_succeed_v12_invoker_generic"),
        ),
        Row("v12 - SET plan_cache_mode (custom plans)", claim("cc_claim_v12_nogeneric"), v12),
        Row("v12 - limits probe", claim("cc_claim_noprobe"), v12),
        Row("v12, arm chosen by IF, no UNION ALL", claim("cc_claim_ifarm"), v12),
        Row("v12, succeed_many by primary key, custom plans", claim("cc_claim_v12"), succeed("cc_succeed_join")),
        Row(
            "v12, succeed_many by primary key, generic plan",
            claim("cc_claim_v12"),
            succeed("cc_succeed_join_generic"),
        ),
        Row("v12, succeed_many with a LEFT JOIN, no EXISTS", claim("cc_claim_v12"), succeed("cc_succeed_leftjoin")),
        Row("slimmest kept: arm by IF + LEFT JOIN", claim("cc_claim_ifarm"), succeed("cc_succeed_leftjoin")),
        Row(
            "installed, finish + next claim, one commit",
            claim("claim"),
            succeed("succeed_many"),
            one_commit=True,
        ),
        Row("LANGUAGE sql (no probe), planned per call", claim("cc_claim_sql"), succeed("cc_succeed_sql")),
    ]
    return [r for r in every if only is None or any(o in r.label for o in only)]


def _timed(conn: psycopg.Connection[dict[str, Any]], statement: str, params: dict[str, Any]) -> tuple[float, list[Any]]:
    t0 = time.perf_counter()
    cur = conn.execute(statement, params, prepare=True)
    got = cur.fetchall() if cur.description is not None else []
    return time.perf_counter() - t0, got


def _commit(conn: psycopg.Connection[dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    conn.execute("COMMIT")
    return time.perf_counter() - t0


def cycle(conn: psycopg.Connection[dict[str, Any]], row: Row) -> None:
    if row.one_commit:
        _one_commit_cycle(conn, row)
        return
    params: dict[str, Any] = {
        "owner": "bench",
        "job_types": [JOB_TYPE] if row.typed else None,
        "limit": 1,
        "lease": 30.0,
    }
    conn.execute("BEGIN")
    if row.generic:
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    seconds, got = _timed(conn, row.claim, params)
    row.times["claim"].append(seconds)
    row.times["claim commit"].append(_commit(conn))
    if len(got) != 1:
        raise RuntimeError(f"{row.label}: the claim returned {len(got)} rows; enqueue more jobs")
    job = got[0]
    if row.bare:
        done: dict[str, Any] = {"id": job["id"], "owner": "bench"}
    else:
        done = {"ids": [job["id"]], "tokens": [job["lease_token"]], "results": [Jsonb({"ok": True})]}
    conn.execute("BEGIN")
    if row.generic:
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    seconds, got = _timed(conn, row.finish, done)
    row.times["finish"].append(seconds)
    row.times["finish commit"].append(_commit(conn))
    if not row.bare and len(got) != 1:
        raise RuntimeError(f"{row.label}: the finish fenced {len(got)} rows, not 1")


# What pgbench substitutes for the placeholders: literals for the claim, the variables its \gset
# set for the finish (pgbench -M prepared sends them as parameters).
_PGBENCH = {
    "%(owner)s": "'bench'",
    "%(limit)s": "1",
    "%(lease)s": "30",
    "%(ids)s": "ARRAY[:id]",
    "%(tokens)s": "ARRAY[:lease_token]",
    "%(results)s": "ARRAY['{\"ok\": true}']",
    "%(id)s": ":id",
}


def _pgbench_line(statement: str, typed: bool) -> str:
    text = re.sub(r"--[^\n]*", "", statement)
    text = text.replace("%(job_types)s", "'{" + JOB_TYPE + "}'" if typed else "NULL")
    for placeholder, value in _PGBENCH.items():
        text = text.replace(placeholder, value)
    return " ".join(text.split()).rstrip(";")


def pgbench_script(row: Row) -> str:
    """The row's cycle for pgbench (a C client: what is left is the server and the wire)."""
    generic = ["SET LOCAL plan_cache_mode = force_generic_plan;"] if row.generic else []
    if row.one_commit:  # the previous cycle's job (variables oc_*, set by -D before the first)
        finish = (
            _pgbench_line(row.finish, row.typed).replace(":id", ":oc_id").replace(":lease_token", ":oc_lease_token")
        )
        return "\n".join(["BEGIN;", finish + ";", _pgbench_line(row.claim, row.typed) + " \\gset oc_", "COMMIT;", ""])
    return "\n".join(
        [
            "BEGIN;",
            *generic,
            _pgbench_line(row.claim, row.typed) + " \\gset",
            "COMMIT;",
            "BEGIN;",
            *generic,
            _pgbench_line(row.finish, row.typed) + ";",
            "COMMIT;",
            "",
        ]
    )


def run_pgbench(dsn: str, table: list[Row], transactions: int, folder: Path) -> None:
    """All rows' scripts in one pgbench run, equal weights (picked at random, so interleaved);
    fills row.pgbench with the mean ms of the claim, its commit, the finish and its commit."""
    args = ["pgbench", "-n", "-M", "prepared", "-r", "-c", "1", "-t", str(transactions * len(table))]
    args += ["-D", "oc_id=0", "-D", "oc_lease_token=00000000-0000-0000-0000-000000000000"]
    for i, r in enumerate(table):
        path = folder / f"row{i}.sql"
        path.write_text(pgbench_script(r), encoding="utf-8")
        args += ["-f", f"{path}@1"]
    done = subprocess.run([*args, dsn], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed: {done.stderr.strip()[-500:]}")
    # pgbench -r: per script, one line per command: "latency-ms failures command".
    sections = re.split(r"^SQL script \d+: ", done.stdout, flags=re.MULTILINE)[1:]
    for r, section in zip(table, sections, strict=True):
        means = [
            float(m.group(1)) for m in re.finditer(r"^\s+([\d.]+)\s+\d+\s+(?!BEGIN|SET LOCAL)\S", section, re.MULTILINE)
        ]
        if r.one_commit and len(means) == 3:  # finish, claim, the one commit
            means = [means[1], means[2], means[0], 0.0]
        if len(means) != 4:
            raise RuntimeError(f"cannot read pgbench's statement latencies for {r.label}: {means}")
        r.pgbench = dict(zip(COLUMNS, means, strict=True))


def _one_commit_cycle(conn: psycopg.Connection[dict[str, Any]], row: Row) -> None:
    conn.execute("BEGIN")
    if row.carry is not None:
        seconds, got = _timed(conn, row.finish, row.carry)
        row.times["finish"].append(seconds)
        row.times["finish commit"].append(0.0)
        if len(got) != 1:
            raise RuntimeError(f"{row.label}: the finish fenced {len(got)} rows, not 1")
    seconds, got = _timed(conn, row.claim, {"owner": "bench", "job_types": [JOB_TYPE], "limit": 1, "lease": 30.0})
    row.times["claim"].append(seconds)
    row.times["claim commit"].append(_commit(conn))
    job = got[0]
    row.carry = {"ids": [job["id"]], "tokens": [job["lease_token"]], "results": [Jsonb({"ok": True})]}


def _ms(values: list[float], q: str) -> float:
    if q == "p10":
        return statistics.quantiles(values, n=10)[0] * 1000
    return statistics.median(values) * 1000


def report(table: list[Row]) -> str:
    """Two tables: psycopg (p50/p10 per statement) and, when it ran, pgbench (means)."""
    bare = next((r for r in table if r.bare), table[0])
    label = max(len(r.label) for r in table)

    def block(title: str, cell: Callable[[Row, str], str], value: Callable[[Row, str], float]) -> list[str]:
        head = f"{title:{label}} " + " ".join(f"{c:>15}" for c in COLUMNS)
        head += f" {'statements':>10} {'vs bare':>7} {'with commits':>12} {'vs bare':>7}"
        lines = [head, "-" * len(head)]
        base_statements = value(bare, "claim") + value(bare, "finish")
        base_total = sum(value(bare, c) for c in COLUMNS)
        for r in table:
            statements = value(r, "claim") + value(r, "finish")
            total = sum(value(r, c) for c in COLUMNS)
            lines.append(
                f"{r.label:{label}} "
                + " ".join(f"{cell(r, c):>15}" for c in COLUMNS)
                + f" {statements:>10.3f} {statements / base_statements:>6.2f}x"
                + f" {total:>12.3f} {total / base_total:>6.2f}x"
            )
        return lines

    lines = block(
        "psycopg, ms p50/p10",
        lambda r, c: f"{_ms(r.times[c], 'p50'):.3f}/{_ms(r.times[c], 'p10'):.3f}",
        lambda r, c: _ms(r.times[c], "p50"),
    )
    if all(r.pgbench for r in table):
        lines += ["", *block("pgbench, ms mean", lambda r, c: f"{r.pgbench[c]:.3f}", lambda r, c: r.pgbench[c])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--rounds", type=int, default=1500)
    parser.add_argument("--pgbench", type=int, default=1500, help="pgbench cycles per row (0: no pgbench run)")
    parser.add_argument(
        "--running",
        type=int,
        default=0,
        help="jobs another worker holds throughout (claimed after ANALYZE saw none running, as in a fresh queue)",
    )
    parser.add_argument("--only", action="append", help="rows whose label contains this (repeatable)")
    args = parser.parse_args()
    table = rows(set(args.only) if args.only else None)
    name = f"pgwork_claimcost_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for f in functions():
                conn.execute(f.ddl())
            conn.execute(
                """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
                   SELECT %s, jsonb_build_object('n', g), 'cc-' || g FROM generate_series(1, %s) AS g""",
                # pgbench picks its scripts at random: a margin, so no row finds the queue empty.
                [
                    JOB_TYPE,
                    len(table) * (args.rounds + 10) + int(len(table) * args.pgbench * 1.3) + 1000 + args.running,
                ],
            )
            conn.execute("VACUUM ANALYZE pgwork.jobs")
            if args.running:
                conn.execute(
                    "SELECT count(*) FROM pgwork.claim('other', %s, %s, 86400, NULL)", [[JOB_TYPE], args.running]
                )
            version = conn.execute("SELECT max(version) FROM pgwork.schema_version").fetchone()
            server = conn.execute("SHOW server_version").fetchone()
            sync = conn.execute("SHOW synchronous_commit").fetchone()
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            for r in table:  # warm up: plans cached, statements prepared
                for _ in range(10):
                    cycle(conn, r)
                for values in r.times.values():
                    values.clear()
            for i in range(args.rounds):
                shift = i % len(table)
                for r in table[shift:] + table[:shift]:
                    cycle(conn, r)
        if args.pgbench > 0 and shutil.which("pgbench") is not None:
            with tempfile.TemporaryDirectory() as folder:
                run_pgbench(dsn, table, args.pgbench, Path(folder))
        print(
            f"schema version {version[0] if version else '?'}, PostgreSQL {server[0] if server else '?'}, "
            f"synchronous_commit {sync[0] if sync else '?'}, {args.running} other jobs running, "
            f"{args.rounds} interleaved cycles per row, "
            "each statement in its own BEGIN ... COMMIT; pgbench: "
            + (f"{args.pgbench} cycles per row, picked at random" if all(r.pgbench for r in table) else "not run")
        )
        print(report(table))
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
