"""pgwork/sql/schema.sql is what the migrations add up to: a freshly migrated database read back
from the catalog (scripts/refresh_schema.py) gives the checked-in file, byte for byte."""

from __future__ import annotations

import difflib

import psycopg

from tests.support.scripts import ROOT, load_script

SCHEMA_FILE = ROOT / "pgwork" / "sql" / "schema.sql"


def test_schema_file_matches_a_freshly_migrated_database(dsn: str) -> None:
    refresh = load_script("refresh_schema")
    with psycopg.connect(dsn) as conn:
        fresh = refresh.render(conn)
    checked_in = SCHEMA_FILE.read_text(encoding="utf-8")
    if fresh != checked_in:
        diff = difflib.unified_diff(
            checked_in.splitlines(), fresh.splitlines(), "schema.sql (checked in)", "migrated", lineterm="", n=1
        )
        shown = list(diff)
        more = f"\n... {len(shown) - 40} more lines" if len(shown) > 40 else ""
        raise AssertionError(f"{refresh.HOW_TO_REFRESH}\n" + "\n".join(shown[:40]) + more)


def test_views_lose_their_qualifiers_as_postgresql_16_prints_them() -> None:
    unqualified = load_script("refresh_schema").unqualified_view
    source = "\n   FROM pgwork.dead_jobs() dead_jobs(id, last_error);"
    v15 = "CREATE VIEW pgwork.dead AS\n SELECT dead_jobs.id,\n    dead_jobs.last_error" + source
    v16 = "CREATE VIEW pgwork.dead AS\n SELECT id,\n    last_error" + source
    assert unqualified(v15) == v16
    assert unqualified(v16) == v16
    joined = "CREATE VIEW v AS\n SELECT a.x\n   FROM t a JOIN u b ON a.x = b.x;"
    assert unqualified(joined) == joined
