"""Reading the vacuum horizon (pgwork.horizon holds the values and the decisions): two bounded
statements on catalogs and statistics views, as the connecting role."""

from __future__ import annotations

from pgwork.db import statements
from pgwork.db.connect import AnyConnection
from pgwork.horizon import Holder, Horizon, TableVacuum

# The oldest holders a reading returns: the first is the horizon; a few more show whether it
# is one forgotten session or many.
HOLDERS = 5


def read_horizon(conn: AnyConnection) -> Horizon:
    holders = statements.many(conn, "vacuum_holders", {"limit": HOLDERS}, Holder)
    table = statements.one(conn, "jobs_vacuum", None, TableVacuum)
    if table is None:  # an aggregate: always one row
        raise RuntimeError("jobs_vacuum returned no row")
    return Horizon(tuple(holders), table)
