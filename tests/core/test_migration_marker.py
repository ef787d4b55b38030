"""The no-transaction marker of a migration file, parsed (pure): what may run outside a
transaction, what is refused and with which words, and how migrate cuts pending migrations into
what runs together."""

from __future__ import annotations

import pytest

from pgwork import sql_files
from pgwork.db.schema import batches
from pgwork.sql_files import NO_TRANSACTION, Step, check_transactional, parse_migration, parse_no_transaction

M = NO_TRANSACTION + "\n"


@pytest.mark.parametrize(
    ("body", "steps"),
    [
        (
            "DROP INDEX CONCURRENTLY IF EXISTS pgwork.jobs_claim_idx;\n",
            [("drop", "pgwork", "jobs_claim_idx", "DROP INDEX CONCURRENTLY IF EXISTS pgwork.jobs_claim_idx")],
        ),
        (
            "-- why, in a comment of its own\n\n"
            "create index concurrently if not exists Jobs_X ON pgwork.jobs (job_type)\n"
            "    WHERE status = 'pending';\n"
            "DROP INDEX CONCURRENTLY IF EXISTS pgwork.old;\n",
            [
                (
                    "create",
                    "pgwork",
                    "jobs_x",
                    "create index concurrently if not exists Jobs_X ON pgwork.jobs (job_type) WHERE status = 'pending'",
                ),
                ("drop", "pgwork", "old", "DROP INDEX CONCURRENTLY IF EXISTS pgwork.old"),
            ],
        ),
        (
            "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS u ON app.t (k);",
            [("create", "app", "u", "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS u ON app.t (k)")],
        ),
    ],
)
def test_accepted(body: str, steps: list[tuple[str, str, str, str]]) -> None:
    assert parse_no_transaction(M + body) == tuple(Step(*s) for s in steps)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DROP INDEX CONCURRENTLY IF EXISTS pgwork.a;", "line 1: a no-transaction migration begins with"),
        (M, "line 1: holds no statement"),
        (M + "-- only a comment\n", "holds no statement"),
        (M + "DROP TABLE pgwork.x;", "line 2: `DROP TABLE pgwork.x ...` is refused: only `CREATE"),
        (M + "DROP INDEX CONCURRENTLY pgwork.a;", "`DROP INDEX CONCURRENTLY ...` is refused"),  # no IF EXISTS
        (M + "DROP INDEX CONCURRENTLY IF EXISTS a;", "is refused"),  # not schema-qualified
        (M + "DROP INDEX CONCURRENTLY IF EXISTS pgwork.a, pgwork.b;", "is refused"),
        (M + "CREATE INDEX IF NOT EXISTS a ON pgwork.jobs (x);", "`CREATE INDEX IF ...` is refused"),
        (M + "CREATE INDEX CONCURRENTLY a ON pgwork.jobs (x);", "is refused"),  # no IF NOT EXISTS
        (M + "CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON jobs (x);", "is refused"),  # table not qualified
        (M + 'CREATE INDEX CONCURRENTLY IF NOT EXISTS "A" ON pgwork.jobs (x);', "is refused"),  # quoted name
        (M + "REINDEX INDEX CONCURRENTLY pgwork.a;", "`REINDEX INDEX CONCURRENTLY ...` is refused"),
        (M + "DROP INDEX CONCURRENTLY IF EXISTS pgwork.a; DROP TABLE t;", "line 2: one statement per `;`"),
        (M + "\nDROP INDEX CONCURRENTLY IF EXISTS pgwork.a", "line 3: the statement does not end with `;`"),
        (M + "DROP INDEX CONCURRENTLY IF EXISTS pgwork.a; -- gone", "line 2: comments go on lines of their own"),
        (M + "DROP INDEX /* x */ CONCURRENTLY IF EXISTS pgwork.a;", "comments go on lines of their own"),
        (M + "-- pgwork: no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS pgwork.a;", "line 2: `-- pgwork: no-tr"),
    ],
)
def test_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_no_transaction(text, "migration 0009_x.sql")
    assert str(caught.value).startswith("migration 0009_x.sql, ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE INDEX CONCURRENTLY a ON pgwork.jobs (x);", "line 1: CONCURRENTLY cannot run in a transaction"),
        ("SELECT 1;\n  drop index concurrently pgwork.a;", "line 2: CONCURRENTLY cannot run"),
        ("-- pgwork: no-transactions\nDROP INDEX pgwork.a;", "line 1: unknown directive"),
        (
            "SELECT 1;\n-- pgwork: no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS pgwork.a;",
            "line 2: `-- pgwork: no-tr",
        ),
    ],
)
def test_an_ordinary_migration_refuses_what_needs_the_marker(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^migration, {message}"):
        check_transactional(text)


def test_an_ordinary_migration_may_name_concurrently_in_comments() -> None:
    check_transactional(
        "-- built CONCURRENTLY by a later version\nCREATE INDEX a ON pgwork.jobs (x); -- CONCURRENTLY\n"
    )


def test_every_shipped_migration_parses_and_24_is_the_first_without_a_transaction() -> None:
    shipped = sql_files.migrations()
    assert [m.version for m in shipped if not m.transactional][:1] == [24]
    [drop] = [m for m in shipped if m.version == 24]
    assert [(s.kind, s.index) for s in drop.steps] == [("drop", "jobs_claim_idx"), ("drop", "jobs_claim_type_idx")]


@pytest.mark.parametrize(
    ("pending", "expected"),
    [
        ("", []),
        ("TTT", ["TTT"]),
        ("N", ["N"]),
        ("TTNT", ["TT", "N", "T"]),
        ("NNT", ["N", "N", "T"]),
        ("TNNTT", ["T", "N", "N", "TT"]),
    ],
)
def test_ordinary_migrations_share_a_transaction_and_each_marked_one_stands_alone(
    pending: str, expected: list[str]
) -> None:
    drop = M + "DROP INDEX CONCURRENTLY IF EXISTS pgwork.a;\n"
    migrations = [parse_migration(i, "m", drop if kind == "N" else "SELECT 1;") for i, kind in enumerate(pending, 1)]
    cut = batches(migrations)
    assert ["".join("T" if m.transactional else "N" for m in batch) for batch in cut] == expected
    assert [m.version for batch in cut for m in batch] == list(range(1, len(pending) + 1))
