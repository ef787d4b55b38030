"""Migration 23 (the ready ring) on a live queue: workers claim and producers enqueue through the
whole migration, and afterwards every job is accounted for: none lost, none claimed twice."""

from __future__ import annotations

from pgwork import sql_files
from tests.support.live_load import assert_every_job_once, migrate_under_load


def test_migrating_to_the_ring_under_live_writers_loses_and_doubles_no_job(empty_dsn: str) -> None:
    [ring] = [m.version for m in sql_files.migrations() if m.name == "ready_ring"]
    applied, took, load = migrate_under_load(empty_dsn, ring - 1)
    assert applied == list(range(ring, sql_files.latest_version() + 1))
    print(f"\nmigration under load: {took * 1000:.0f} ms; {sum(map(len, load.produced))} produced")
    assert_every_job_once(empty_dsn, load)
